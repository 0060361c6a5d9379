"""The progress display of ``ductline run`` and ``ductline wait``: a step that waits
out its ``delay=`` says until when (a delay is not a hang), and the elapsed time
counts from the command's start, on while every step run known so far is done."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import uuid

import delay_app
from rich.console import Console

from ductline import timestamps, views
from ductline.progress import RunProgress


def test_wait_says_until_when_a_step_waits_out_its_delay(store, db_url) -> None:
    handle = delay_app.waiting.trigger(1, database=store)
    [job] = store.run_jobs(handle.id)
    done = subprocess.run([sys.executable, "-m", "ductline", "wait", handle.id, "--timeout", "1",
                           "--database", db_url], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 124, done.stderr
    until = views.utc_clock(str(timestamps.iso(job["not_before_ms"])))
    [line] = [ln for ln in done.stderr.splitlines() if ln.startswith("steps")]
    assert f"far_future waits until {until}" in line, done.stderr


def test_elapsed_time_counts_on_while_every_known_step_is_done(store) -> None:
    """rich's elapsed column stops when completed == total; the display's does not."""
    now = [100.0]
    shown = RunProgress(store, "no-run", Console(file=io.StringIO(), width=200), clock=lambda: now[0])._progress
    [task_id] = shown.task_ids
    shown.update(task_id, total=1, completed=1)  # every step run known so far is done
    now[0] += 7.5
    [task] = shown.tasks
    assert str(shown.columns[-1].render(task)) == "0:00:07"


def test_a_step_that_crashes_its_child_says_why_its_next_attempt_waits(store, caplog) -> None:
    """A step that kills its child every time spends its crash budget (max_crash 10,
    waits doubling from 1 s to 60 s: about four minutes in all). The attempt's log line
    and the progress display say why the run waits, and until when."""
    from ductline.engine.batch import Outcome, record_batch
    from ductline.engine.record import Attempt
    from ductline.model.outcomes import child_died_message
    from ductline.model.states import AttemptResult
    from ductline.store.records import NewJob, NewRun

    run = NewRun(id=uuid.uuid4().hex, pipeline="crashing", args="[1]", timeout_seconds=None, delay_ms=0,
                 not_before_ms=None)
    job = NewJob(id=uuid.uuid4().hex, run_id=run.id, pipeline="crashing", step="boom", scope="",
                 parent_scope=None, elem_index=None, status="pending", input="[1]", delay_ms=0, max_retry=3,
                 max_crash=10, retry_delay_seconds=10, timeout_seconds=None)
    with store.transaction() as tx:
        tx.insert_run(run)
        tx.insert_jobs([job])
    with store.dialect.transaction() as s:  # five crashes before this attempt
        getattr(s, "_conn").execute(f"UPDATE ductline_jobs SET crashes = 5 WHERE id = '{job.id}'")
    [c] = store.claim("worker-progress", ["crashing"], 1, 60_000)
    ended = Outcome(Attempt(c.job_id, c.run_id, c.step, c.scope, c.attempt, c.lease_token, c.started_ms),
                    c.pipeline, AttemptResult.CRASHED, error_type="ChildDied", error=child_died_message(1))
    with caplog.at_level(logging.WARNING, logger="ductline.engine"):
        [done] = record_batch(store, [ended], {}, 0, now_ms=lambda: 0)
    why = "after crash 6 of at most 10 (max_crash; backoff doubles to 60 s)"
    assert (done.retry_in_ms, done.why) == (32_000, why)
    assert [r.getMessage() for r in caplog.records if r.name == "ductline.engine"] == [
        f"Job crashed: the child process running the step exited with code 1; next attempt in 32 s, {why}"]

    [row] = store.run_jobs(run.id)
    until = views.utc_clock(str(timestamps.iso(row["not_before_ms"])))
    progress = RunProgress(store, run.id, Console(file=io.StringIO(), width=300))
    progress._refresh()
    [task] = progress._progress.tasks
    assert task.fields["current"] == f"boom retries at {until} {why}"
