"""Step logs with a real worker and real children, on both backends: captured per
attempt, forwarded to the worker's JSON log, stored, shown by ``ductline logs``
and ``show --json``, capped, and cheap for the worker when a step floods."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import log_app
from helpers import FAST_ENV, ductline_in_process, stop_worker, wait_for

from ductline.store import steplogs
from ductline.views import run_view

MiB = 1024 * 1024
APP = log_app.__file__


def _worker(db_url, tmp_path, env=None):
    err = open(tmp_path / "worker.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ductline", "--log-format", "json", "worker", "--app", APP,
         "--database", db_url, "--concurrency", "1"],
        env={**os.environ, **FAST_ENV, **(env or {})}, stderr=err)
    err.close()
    return proc


def _cli(db_url, *args):
    """A command run by the command line's entry point in this process; a follower of
    a live run and the errors below run as real processes."""
    done = ductline_in_process(*args, "--database", db_url)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_logs_are_captured_forwarded_stored_and_shown(store, db_url, tmp_path):
    proc = _worker(db_url, tmp_path)
    try:
        handle = log_app.talk.trigger(1, database=store)
        assert handle.wait(60) == "completed"
    finally:
        stop_worker(proc)
    records = steplogs.of_run(store.dialect, handle.id)
    by_step = {}
    for r in records:
        by_step.setdefault(r.step, []).append((r.level, r.logger, r.message))
    chatty = by_step["chatty"]
    assert ("INFO", "log_app.steps", "starting with 1") in chatty
    assert ("INFO", "stdout", "printed line one") in chatty
    assert ("INFO", "stdout", "printed line two") in chatty
    assert ("WARNING", "stderr", "to stderr") in chatty
    assert ("WARNING", "log_app.steps", "from a thread of the step") in chatty
    assert not any("debug is below" in m for _, _, m in chatty)
    caught = [m for level, _, m in chatty if level == "ERROR"]
    assert caught and caught[0].startswith("caught it\nTraceback") and "ValueError: handled" in caught[0]
    assert by_step["verbose"] == [("DEBUG", "log_app.steps", "debug kept: this step logs at DEBUG")]
    assert by_step["quiet"] == [("ERROR", "log_app.steps", "error kept")]

    # The worker's JSON lines carry the job fields.
    lines = [json.loads(x) for x in (tmp_path / "worker.log").read_text().splitlines() if x.startswith("{")]
    forwarded = [x for x in lines if x.get("message") == "starting with 1"]
    assert forwarded, lines[-5:]
    entry = forwarded[0]
    assert entry["run_id"] == handle.id and entry["step"] == "chatty" and entry["attempt"] == 1
    assert entry["job_id"] and entry["step_logger"] == "log_app.steps" and entry["level"] == "INFO"

    # show --json has them per attempt; ``ductline logs`` prints them, per step too.
    view = json.loads(_cli(db_url, "show", handle.id, "--json"))
    first = view["steps"][0]["attempts"][0]["logs"]
    assert {k: first[1][k] for k in ("level", "logger", "message")} == {
        "level": "INFO", "logger": "stdout", "message": "printed line one"}
    assert first[1]["at"].endswith("Z")
    assert run_view(store, handle.id)["steps"][2]["attempts"][0]["logs"][0]["message"] == "error kept"
    text = _cli(db_url, "logs", handle.id)
    assert "chatty #1 INFO stdout: printed line one" in text and "error kept" in text
    only = _cli(db_url, "logs", handle.id, "--step", "quiet", "--json").splitlines()
    assert [json.loads(x)["message"] for x in only] == ["error kept"]
    followed = _cli(db_url, "logs", handle.id, "--follow")  # a settled run: prints and returns
    assert followed == text
    none = ductline_in_process("logs", handle.id, "--step", "absent", "--database", db_url)
    # The worker recorded the definition: a step it does not have is an error naming those it has.
    assert (none.returncode, none.stdout) == (2, "")
    assert f"run {handle.id} has no step 'absent'; its steps: chatty, verbose, quiet" in none.stderr


def test_each_attempt_keeps_its_own_logs(store, tmp_path, db_url):
    proc = _worker(db_url, tmp_path)
    try:
        handle = log_app.retrying.trigger(5, database=store)
        assert handle.wait(60) == "completed"
    finally:
        stop_worker(proc)
    attempts = run_view(store, handle.id)["steps"][0]["attempts"]
    assert [[e["message"] for e in a["logs"]] for a in attempts] == [["attempt 1 here"], ["attempt 2 here"]]


def test_a_step_writing_100_mb_keeps_its_result_and_the_worker_small(store, db_url, tmp_path):
    proc = _worker(db_url, tmp_path, env={"DUCTLINE_STEP_LOG_MAX_BYTES": str(MiB)})
    try:
        wait_for(lambda: store.list_workers(), timeout=60)
        before = _peak_rss_kib(proc.pid)
        handle = log_app.flooding.trigger(7, database=store)
        assert handle.wait(300) == "completed"
        after = _peak_rss_kib(proc.pid)
    finally:
        stop_worker(proc)
    assert handle.output() == {"survived": 7}
    # The worker's peak resident memory grew by far less than the 100 MB written.
    assert after - before < 32 * 1024, (before, after)
    records = steplogs.of_run(store.dialect, handle.id)
    kept = sum(len(r.message.encode()) for r in records[:-1])
    assert MiB - 1024 * 1024 // 64 <= kept <= MiB
    last = records[-1]
    assert last.logger == "ductline" and last.level == "WARNING" and last.message.startswith("log cut:")
    print(f"\nflood: worker peak RSS {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after; "
          f"{len(records)} records, {kept} bytes kept")


def test_logs_follow_prints_records_as_a_running_step_writes_them(store, db_url, tmp_path):
    gate = tmp_path / "gate"
    proc = _worker(db_url, tmp_path)
    follow = None
    try:
        handle = log_app.gated.trigger(str(gate), database=store)
        follow = subprocess.Popen([sys.executable, "-m", "ductline", "logs", handle.id, "--follow", "--database",
                                   db_url], stdout=subprocess.PIPE, text=True)
        assert follow.stdout is not None
        first = follow.stdout.readline()  # printed while the step still runs
        assert first.rstrip().endswith("INFO stdout: waiting for the gate"), first
        assert handle.status() == "running"
        gate.write_text("open")
        rest = follow.stdout.read()  # ends when the run settles
        assert follow.wait(60) == 0
        assert rest.rstrip().endswith("INFO stdout: the gate is open")
        assert handle.wait(60) == "completed"
    finally:
        if follow is not None:
            if follow.poll() is None:
                follow.kill()
                follow.wait()
            assert follow.stdout is not None
            follow.stdout.close()
        stop_worker(proc)


def test_logs_of_a_missing_run_is_a_clear_error(db_url):
    done = ductline_in_process("logs", "deadbeef", "--database", db_url)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: RunNotFound: run 'deadbeef' not found"
