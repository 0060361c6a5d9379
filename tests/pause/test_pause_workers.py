"""Pauses with real worker processes on both backends: resume from the CLI, a pause
that expires (fails closed, in-flight branch killed), the run deadline during a
pause, a divide whose other branch finishes, `ductline show` / `runs`, bad input. The
tests that need a worker share one per backend (`shared_worker`): each looks only at
its own runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pause_app
from helpers import ductline_in_process, shared_worker_fixture, wait_for
from pause_support import APP, drive, jobs_by_step

from ductline.views import iso

shared_worker = shared_worker_fixture(APP)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command line, in a subprocess."""
    return subprocess.run([sys.executable, "-m", "ductline", *args], capture_output=True, text=True, timeout=60)


def clis(*calls: tuple[str, ...]) -> list[tuple[int, str, str]]:
    """Several commands, each run by the command line's entry point in this process:
    ``(exit code, stdout, stderr)`` each."""
    done = [ductline_in_process(*args) for args in calls]
    return [(d.returncode, d.stdout, d.stderr) for d in done]


def test_a_paused_run_waits_without_a_lease_and_the_cli_resumes_it_with_a_new_input(
        shared_store, shared_backend_url, shared_worker):
    handle = pause_app.chain.trigger(7, database=shared_store)
    wait_for(lambda: handle.status() == "paused", 20)
    time.sleep(0.3)  # a worker that would wrongly claim the paused job has had its chance
    approve = jobs_by_step(shared_store, handle.id)["approve"]
    assert (approve["status"], approve["attempts"]) == ("paused", 0)
    assert shared_store.lease_state(approve["id"]) == {"status": "paused", "lease_token": None}
    done = cli("resume", handle.id, "--input", '{"approved_by": "ana"}', "--database", shared_backend_url)
    assert (done.returncode, done.stdout.strip()) == (0, f"run {handle.id} resumed: approve with a new input")
    assert handle.wait(90) == "completed"
    assert handle.output() == {"approved": {"approved_by": "ana"}}


def test_a_pause_that_expires_fails_the_run_closed_and_kills_the_other_branch(shared_store, shared_worker):
    handle = pause_app.expiring_divided.trigger(4, database=shared_store)
    assert handle.wait(90) == "failed"
    reason = "pause before step 'approve' expired after 1 s without a resume"
    run = shared_store.get_run(handle.id)
    assert run["halt_reason"] == "pause_expired"
    assert json.loads(run["metadata"]) == {"pause_expired": True, "paused_step": "approve",
                                          "pause_timeout_seconds": 1, "error": reason}
    jobs = jobs_by_step(shared_store, handle.id)
    assert {s: (j["status"], j["skip_reason"]) for s, j in jobs.items()} == {
        "prepare": ("completed", None),
        "approve": ("failed", reason),               # never ran: no attempt
        "slow_side": ("cancelled", f"cancelled because the {reason}"),
        "collect": ("skipped", "pause expired"),
    }
    attempts = {a["job_id"]: a for a in shared_store.run_attempts(handle.id)}
    assert jobs["approve"]["id"] not in attempts
    side = attempts[jobs["slow_side"]["id"]]
    assert (side["result"], side["error_type"]) == ("cancelled", "PauseExpired")
    # the idle worker's timer fires at the expiry; the maintenance scan (0.5 s here) bounds it
    assert 0 <= run["finished_ms"] - jobs["approve"]["pause_expires_ms"] < 1000


def test_the_run_deadline_keeps_counting_during_a_pause(shared_store, shared_worker):
    handle = pause_app.deadline.trigger(1, database=shared_store)
    wait_for(lambda: handle.status() == "paused", 20)
    assert handle.wait(90) == "failed"
    run = shared_store.get_run(handle.id)
    metadata = json.loads(run["metadata"])
    assert (metadata["timeout_exceeded"], metadata["timeout_seconds"]) == (True, 2)
    assert run["halt_reason"] is None
    jobs = jobs_by_step(shared_store, handle.id)
    assert {s: (j["status"], j["skip_reason"]) for s, j in jobs.items()} == {
        "prepare": ("completed", None), "approve": ("skipped", "workflow timeout"),
        "finish": ("skipped", "workflow timeout")}


def test_a_divide_finishes_its_other_branch_while_paused_then_completes_after_resume(shared_store, shared_worker):
    handle = pause_app.divided.trigger(5, database=shared_store)
    wait_for(lambda: jobs_by_step(shared_store, handle.id).get("side", {}).get("status") == "completed", 20)
    assert handle.status() == "paused"
    assert sorted(jobs_by_step(shared_store, handle.id)) == ["approve", "prepare", "side"]
    assert handle.resume(input={"order": 50}) == ["approve"]
    assert handle.wait(90) == "completed"
    assert handle.output() == [{"approved": {"order": 50}}, {"side": 5}]


def test_show_and_runs_list_the_paused_step_and_its_expiry(store, db_url):
    handle = pause_app.long.trigger(2, database=store)
    drive(store, pause_app.long)
    approve = jobs_by_step(store, handle.id)["approve"]
    (c1, shown, _), (c2, as_json, _), (c3, runs, _) = clis(
        ("show", handle.id, "--database", db_url), ("show", handle.id, "--json", "--database", db_url),
        ("runs", "--status", "paused", "--json", "--database", db_url))
    assert (c1, c2, c3) == (0, 0, 0)
    assert (f"step approve is paused, waiting for resume: ductline resume {handle.id} [--input JSON]; "
            f"the pause expires at {iso(approve['pause_expires_ms'])}") in shown
    view = json.loads(as_json)
    assert view["status"] == "paused"
    assert [(s["step"], s["status"], s["pause_expires"]) for s in view["steps"]] == [
        ("prepare", "completed", None), ("approve", "paused", iso(approve["pause_expires_ms"]))]
    listed = json.loads(runs)
    assert [(r["run_id"], r["status"]) for r in listed] == [(handle.id, "paused")]


def test_bad_resumes_from_the_cli_exit_2_and_change_nothing(store, db_url):
    handle = pause_app.chain.trigger(3, database=store)
    drive(store, pause_app.chain)
    pending = pause_app.chain.trigger(4, database=store)  # not driven: still pending
    (code1, _, not_paused), (code2, _, bad_json), (code3, _, unknown) = clis(
        ("resume", pending.id, "--database", db_url),
        ("resume", handle.id, "--input", "{approved: yes}", "--database", db_url),
        ("resume", "f" * 32, "--input", "1", "--database", db_url))
    assert (code1, code2, code3) == (2, 2, 2)
    assert f"InvalidStateError: run {pending.id} is pending; only a paused run can be resumed" in not_paused
    assert "error: --input is not valid JSON: Expecting property name enclosed in double quotes: line 1 " \
           "column 2 (char 1)" in bad_json
    assert f"run {'f' * 32!r} not found" in unknown
    assert (pending.status(), handle.status()) == ("pending", "paused")
    assert jobs_by_step(store, handle.id)["approve"]["status"] == "paused"
    handle.resume()
    drive(store, pause_app.chain)
    assert handle.output() == {"approved": {"order": 3}}  # the refused input never reached the step
