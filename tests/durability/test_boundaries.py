"""A crossed boundary belongs to the job: a step that called `cross_boundary` is never
run again by a worker's shutdown, by the rescue of a killed worker, or by a plain
retry -- only by a retry forced for that step. Real workers, both backends."""

from __future__ import annotations

import signal
import subprocess
import sys

import boundary_app
import pytest
from helpers import start_worker, stop_worker, wait_for

from ductline import InvalidStateError
from ductline.operations.revive import retry_run
from ductline.views import run_view

APP = boundary_app.__file__


def steps(store, run_id):
    return {s["step"]: s for s in run_view(store, run_id)["steps"]}


def crossed(store, run_id):
    return any(j["boundary"] for j in store.run_jobs(run_id))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["shutdown", "killed"])
def test_a_worker_that_stops_during_a_crossed_step_never_gets_it_run_again(store, db_url, tmp_path, sig):
    marker = tmp_path / "ran"
    env = {"DUCTLINE_SHUTDOWN_GRACE_SECONDS": "1", "DUCTLINE_LEASE_SECONDS": "2"}
    first = start_worker(db_url, app=APP, env=env)
    handle = boundary_app.hang.trigger(str(marker), database=store)
    wait_for(lambda: crossed(store, handle.id) and marker.exists(), 30)
    stop_worker(first, sig)
    second = start_worker(db_url, app=APP, env=env)  # rescues a killed worker's lease
    try:
        assert handle.wait(90) == "halted"
        assert store.get_run(handle.id)["halt_reason"] == "unsafe_to_retry"
        step = steps(store, handle.id)["pays_then_hangs"]
        assert step["status"] == "failed" and step["boundary"] == "charged the card"
        # A shutdown gives the attempt back (shown released: no operator cancelled it);
        # its step crossed a boundary, so the run halts instead of running it again.
        assert [a["result"] for a in step["attempts"]] == ["released" if sig == signal.SIGTERM else "crashed"]
        assert marker.read_text() == "1"  # it ran once
        with pytest.raises(InvalidStateError, match="pays_then_hangs"):
            retry_run(store, handle.id)  # a plain retry is refused and names the step
        assert store.get_run(handle.id)["status"] == "halted"
    finally:
        stop_worker(second)


def test_a_plain_retry_never_revives_a_crossed_step_another_branch_halted(store, db_url, tmp_path):
    marker = str(tmp_path / "branch")
    worker = start_worker(db_url, app=APP, env={"DUCTLINE_RETRY_DELAY": "0"})
    try:
        handle = boundary_app.two_branches.trigger(marker, database=store)
        wait_for(lambda: store.get_run(handle.id)["status"] == "halted", 30)
        (tmp_path / "branch.halted").write_text("")
        wait_for(lambda: steps(store, handle.id)["pays_then_fails"]["status"] == "failed", 30)
        assert store.get_run(handle.id)["halt_reason"] == "job_retries_exhausted"
        refused = subprocess.run([sys.executable, "-m", "ductline", "retry", handle.id, "--database", db_url],
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode == 2 and "--force STEP" in refused.stderr and "pays_then_fails" in refused.stderr
        for _ in range(2):  # refused every time, and nothing changes
            with pytest.raises(InvalidStateError, match="pays_then_fails.*shipped the parcel"):
                retry_run(store, handle.id)
            assert store.get_run(handle.id)["status"] == "halted"
            assert len(steps(store, handle.id)["pays_then_fails"]["attempts"]) == 1
        with pytest.raises(InvalidStateError, match="no failed step of after crossed a boundary"):
            retry_run(store, handle.id, force=["pays_then_fails", "after"])
        forced = subprocess.run([sys.executable, "-m", "ductline", "retry", handle.id, "--force", "pays_then_fails",
                                 "--database", db_url], capture_output=True, text=True, timeout=60)
        assert forced.returncode == 0, forced.stderr  # on purpose, by name: it runs again
        wait_for(lambda: len(steps(store, handle.id)["pays_then_fails"]["attempts"]) == 2, 30)
    finally:
        stop_worker(worker)
