"""`ductline run` says why a run that did not complete ended: the halt reason with
the step that halted it and its last error, or the error recorded on a failed run
(its deadline passed)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import APP


def test_a_failed_run_prints_its_reason(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ductline", "run", f"{APP}:deadline_chain", "--args", "[1]",
                           "--database", f"sqlite:///{tmp_path / 'd.db'}"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    said = done.stdout + done.stderr  # the status line goes to stderr, the output to stdout
    assert ": failed (the run exceeded its deadline of 2 s)" in said, said


def test_the_progress_line_of_a_halted_run_counts_its_failed_step(tmp_path: Path) -> None:
    """The bar counts every step that ended, a failed one too: the line says how many failed."""
    done = subprocess.run([sys.executable, "-m", "ductline", "run", f"{APP}:halts_before_deadline",
                           "--args", "[1]", "--database", f"sqlite:///{tmp_path / 'd.db'}"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    said = done.stdout + done.stderr
    assert "halted" in said, said
    [line] = [ln for ln in said.splitlines() if ln.startswith("steps")]
    assert " 1 failed " in line, said


def test_a_halted_run_names_its_step_and_last_error(tmp_path: Path) -> None:
    """Not only ``halted (job_retries_exhausted)``: which step gave up, after how many
    attempts, with what error, and the commands that show and revive the run."""
    done = subprocess.run([sys.executable, "-m", "ductline", "run", f"{APP}:halts_before_deadline",
                           "--args", "[1]", "--database", f"sqlite:///{tmp_path / 'd.db'}"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    [status] = [i for i, line in enumerate(lines) if line.startswith("run ") and ": halted (" in line]
    assert lines[status].endswith(": halted (job_retries_exhausted)"), done.stderr
    assert lines[status + 1].startswith("  step fails_at_once failed after 1 attempt: RuntimeError: boom (at "), \
        done.stderr
    assert re.search(r"rt_app.py:\d+ in fails_at_once\)$", lines[status + 1]), done.stderr
    run_id = lines[status].split()[1].rstrip(":")
    shown = f"ductline show {run_id[:8]}"
    assert re.fullmatch(rf"  `{shown}` lists every attempt; `ductline retry {run_id[:8]}` revives it from its "
                        r"failed step\(s\), until its run deadline at \d\d:\d\d:\d\d UTC \(then the run fails\)",
                        lines[status + 2]), done.stderr
    # the run deadline's time, as `show --json` gives it
    shown_json = subprocess.run([sys.executable, "-m", "ductline", "show", run_id, "--json",
                                 "--database", f"sqlite:///{tmp_path / 'd.db'}"],
                                capture_output=True, text=True, timeout=300, cwd=tmp_path)
    deadline = json.loads(shown_json.stdout)["deadline"]
    assert f"at {deadline[11:19]} UTC" in lines[status + 2], (deadline, done.stderr)


BUGGY_APP = '''from ductline import Pipeline


def helper(x):
    return x / 0


def compute(x):
    return helper(x) + 1


bug = Pipeline("bug").start(compute, max_attempts=1)
'''


def test_a_step_that_failed_for_good_is_named_with_where_it_raised(tmp_path: Path) -> None:
    """A bug in a step: `run` (and `wait`, which shares its summary) and `show` say
    where its last attempt raised, from the traceback it stored: not only ``Type: message``."""
    (tmp_path / "bug.py").write_text(BUGGY_APP)
    database = f"sqlite:///{tmp_path / 'd.db'}"
    done = subprocess.run([sys.executable, "-m", "ductline", "run", "bug.py:bug", "--args", "[3]",
                           "--database", database], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert ("  step compute failed after 1 attempt: ZeroDivisionError: division by zero "
            "(at bug.py:5 in helper, called from bug.py:9 in compute)") in done.stderr.splitlines(), done.stderr
    [status] = [line for line in done.stderr.splitlines() if line.startswith("run ") and ": halted (" in line]
    shown = subprocess.run([sys.executable, "-m", "ductline", "show", status.split()[1].rstrip(":"),
                            "--database", database], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                           env={**os.environ, "COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    assert "ZeroDivisionError: division by zero (at bug.py:5 in helper, called from bug.py:9 in compute)" \
        in shown.stdout, shown.stdout
