"""The progress display of ``ductline run`` and ``ductline wait``: a step that waits
out its ``delay=`` says until when (a delay is not a hang), and the elapsed time
counts from the command's start, on while every step run known so far is done."""

from __future__ import annotations

import io
import os
import subprocess
import sys

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
