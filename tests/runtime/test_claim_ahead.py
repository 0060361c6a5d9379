"""Jobs claimed ahead (`ductline.runtime.ahead`): a worker whose attempts are short
queues a few claimed jobs behind the running ones. Queued jobs keep the delivery
contract of running ones: a SIGKILL loses none of them (they run elsewhere once
their leases expire), a shutdown gives them back at once, and a queued job of a
cancelled run is never started."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
from helpers import start_worker, stop_worker, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apps"))
import ahead_app  # noqa: E402

from ductline.model.outcomes import RELEASED_TYPE  # noqa: E402

APP = str(Path(__file__).resolve().parents[1] / "apps" / "ahead_app.py")
QUEUED = 1  # quick runs queued behind the slow one


def marks(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def release(path: Path) -> None:
    """Let the held step return."""
    Path(f"{path}.release").touch()


def jobs_of(store, handles):
    return [store.run_jobs(h.id)[0] for h in handles]


def queue_behind_a_slow_step(store, db_url, tmp_path, env=None, stderr=None):
    """One slot: quick runs first (the worker learns its attempts are short), then a
    run held until `release`, then a quick run that the worker claims ahead while it waits
    (it queues as many jobs as it has slots before it waits for results). Returns
    (worker, marks file, slow handle, queued handles)."""
    path = tmp_path / "marks.txt"
    worker = start_worker(db_url, concurrency=1, app=APP,
                          env={"AHEAD_MARKS": str(path), "DUCTLINE_SHUTDOWN_GRACE_SECONDS": "30", **(env or {})},
                          stderr=stderr)
    try:
        warm = [ahead_app.ahead.trigger(f"warm{i}", database=store) for i in range(5)]
        for handle in warm:
            assert handle.wait(60) == "completed"
        slow = ahead_app.ahead.trigger("hold", database=store)
        wait_for(lambda: "hold" in marks(path), timeout=30)
        queued = [ahead_app.ahead.trigger(f"q{i}", database=store) for i in range(QUEUED)]
        # Claimed (running, with a lease) while the only slot is held: queued ahead.
        wait_for(lambda: all(j["status"] == "running" for j in jobs_of(store, queued)), timeout=10)
        assert not any(m.startswith("q") for m in marks(path))
    except BaseException:
        stop_worker(worker, signal.SIGKILL)
        raise
    return worker, path, slow, queued


def test_a_killed_worker_loses_no_queued_job(store, db_url, tmp_path):
    worker, path, slow, queued = queue_behind_a_slow_step(store, db_url, tmp_path)
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    release(path)
    second = start_worker(db_url, app=APP, env={"AHEAD_MARKS": str(path)})
    try:
        for handle in [slow, *queued]:
            assert handle.wait(60) == "completed"
    finally:
        stop_worker(second)
    called = marks(path)
    for i in range(QUEUED):  # each queued step ran once, on the second worker
        assert called.count(f"q{i}") == 1, called
    for job in jobs_of(store, queued):  # the unstarted first attempt counts as crashed
        assert job["attempts"] == 2 and job["crashes"] == 1, job


def test_shutdown_gives_queued_jobs_back_at_once(store, db_url, tmp_path):
    log = tmp_path / "worker.log"
    with open(log, "wb") as err:
        worker, path, slow, queued = queue_behind_a_slow_step(store, db_url, tmp_path, stderr=err)
    try:
        worker.send_signal(signal.SIGTERM)
        # Given back while the held attempt still runs (it has 30 s of grace).
        wait_for(lambda: all(j["status"] == "pending" for j in jobs_of(store, queued)), timeout=10)
        assert slow.status() == "running"
        release(path)
        assert worker.wait(60) == 0
    finally:
        stop_worker(worker, signal.SIGKILL)
    # A scheduling detail, not news: at the default INFO level the log does not say it
    # (on a newcomer's first run it read like an error).
    said = log.read_text()
    assert "Worker stopping" in said and "reserved by this worker" not in said, said
    assert slow.status() == "completed"
    for handle in queued:
        attempts = store.run_attempts(handle.id)
        assert [(a["result"], a["error_type"]) for a in attempts] == [("cancelled", RELEASED_TYPE)]
    assert not any(m.startswith("q") for m in marks(path))
    second = start_worker(db_url, app=APP, env={"AHEAD_MARKS": str(path)})
    try:
        for handle in queued:
            assert handle.wait(60) == "completed"
    finally:
        stop_worker(second)
    for job in jobs_of(store, queued):  # nothing charged for the given-back attempt
        assert job["failures"] == 0 and job["crashes"] == 0, job


def test_a_queued_job_of_a_cancelled_run_is_not_started(store, db_url, tmp_path):
    worker, path, slow, queued = queue_behind_a_slow_step(store, db_url, tmp_path)
    try:
        cancelled_ms = store.now_ms()
        queued[0].cancel()
        # A queued job starts without asking the database while its lease was confirmed
        # within FRESH_SECONDS (like a claim made just before the cancel); once the
        # worker has renewed its leases after the cancel, it knows and drops the job.
        wait_for(lambda: any(w["heartbeat_ms"] > cancelled_ms for w in store.list_workers()), timeout=30)
        release(path)
        assert slow.wait(60) == "completed"
        assert queued[0].wait(10) == "cancelled"
    finally:
        stop_worker(worker)
    called = marks(path)
    assert "q0" not in called, called


def test_a_queued_job_s_attempt_starts_when_it_runs_not_when_it_was_claimed(store, db_url, tmp_path):
    """`ductline show` and the dashboard read an attempt's start from its row: for a job
    that waited in the queue ahead, that is when its step began, not its claim; and its
    timeout counted from that start, which its deadline says."""
    worker, path, slow, queued = queue_behind_a_slow_step(store, db_url, tmp_path)
    try:
        [claimed_ms] = [a["started_ms"] for a in store.run_attempts(queued[0].id)]
        wait_for(lambda: store.now_ms() > claimed_ms + 200)  # the queued job waits this long at least
        released_ms = store.now_ms()
        release(path)
        assert queued[0].wait(60) == "completed"
    finally:
        stop_worker(worker)
    [attempt] = store.run_attempts(queued[0].id)
    # It began after the held step returned (50 ms: the worker's reading of the database clock).
    assert attempt["started_ms"] >= released_ms - 50 > claimed_ms
    assert attempt["finished_ms"] >= attempt["started_ms"]
    assert attempt["deadline_ms"] - attempt["started_ms"] == 600_000


@pytest.mark.parametrize("lease", [None, "1.2"], ids=["default-lease", "short-lease"])
def test_a_job_held_behind_a_step_that_runs_long_goes_to_another_worker(store, db_url, tmp_path, lease):
    """A queued job may have been sent ahead to the child running the held step
    (`ductline.runtime.prefetch`): the worker takes it back from that child, busy as
    it is, and gives it back once it is overdue, so another worker runs it while the
    held step still runs. It runs once. With a short lease, renewals come often: the
    take-back counts from when the job was sent, not from its last renewal."""
    env = {} if lease is None else {"DUCTLINE_LEASE_SECONDS": lease}
    worker, path, slow, queued = queue_behind_a_slow_step(store, db_url, tmp_path, env=env)
    second = start_worker(db_url, app=APP, env={"AHEAD_MARKS": str(path)})
    try:
        for handle in queued:
            assert handle.wait(60) == "completed"
        assert slow.status() == "running"  # never released yet: the queued job did not wait for it
        release(path)
        assert slow.wait(60) == "completed"
    finally:
        stop_worker(second)
        stop_worker(worker)
    called = marks(path)
    for i in range(QUEUED):
        assert called.count(f"q{i}") == 1, called
    for handle in queued:  # given back unstarted, then run by the other worker
        attempts = store.run_attempts(handle.id)
        assert [(a["result"], a["error_type"]) for a in attempts] == [("cancelled", RELEASED_TYPE),
                                                                     ("succeeded", None)], attempts
