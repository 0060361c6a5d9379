"""A process that used the database exits as soon as its work is done.

psycopg_pool runs a pool's workers on daemon threads. A pool still open when the
interpreter finalizes is closed by its ``__del__``, which waits 5 s for each of
them; from Python 3.13 on those threads no longer run then, so every wait runs
out: 20 s for a pool's four threads, after the script's work was done. Stores and
pools are closed at exit instead.

Each test times the stretch from the process's last output to its exit, leaving
out the start-up (imports, connecting) that a busy machine stretches. The bound,
5 s, is one of those waits: under it, no pool thread was left to the interpreter's
finalization. Such an exit takes 0.1 to 0.5 s here; the bound is generous for a busy
machine because it guards against the regression, it does not measure speed. The
failure shows on Python 3.13 and later, which `.ci/run` runs these tests on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import IO

# One of psycopg_pool's per-thread waits at finalization (see above).
EXIT_BOUND_SECONDS = 5.0
STUCK_THREAD_WARNING = "couldn't stop thread"

TRIGGERING_SCRIPT = textwrap.dedent("""
    from ductline import Pipeline

    def one(x):
        return x

    probe = Pipeline("exit_probe").start(one)

    if __name__ == "__main__":
        handle = probe.trigger(1)
        print("triggered", handle.id, flush=True)
""")


def _env(db_url: str) -> dict[str, str]:
    return {**os.environ, "DUCTLINE_DATABASE_URL": db_url, "PYTHONUNBUFFERED": "1"}


def _seconds_from_line_to_exit(proc: subprocess.Popen[str], stream: IO[str], marker: str) -> tuple[float, str]:
    """Read ``stream`` up to a line containing ``marker``; the seconds from then to
    the process's exit, and everything the process wrote to ``stream``."""
    seen: list[str] = []
    for line in stream:
        seen.append(line)
        if marker in line:
            break
    else:
        proc.wait(60)
        raise AssertionError(f"no line with {marker!r} before the process ended: {''.join(seen)}")
    since = time.monotonic()
    rest = stream.read()  # ends when the process has closed its end, at exit
    proc.wait(60)
    return time.monotonic() - since, "".join(seen) + rest


def test_a_script_that_triggered_a_run_exits_promptly(db_url: str, tmp_path: Path) -> None:
    script = tmp_path / "trigger_and_exit.py"
    script.write_text(TRIGGERING_SCRIPT, encoding="utf-8")
    with subprocess.Popen([sys.executable, str(script)], env=_env(db_url), cwd=tmp_path, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        assert proc.stdout is not None
        seconds, output = _seconds_from_line_to_exit(proc, proc.stdout, "triggered")
    assert proc.returncode == 0, output
    assert seconds < EXIT_BOUND_SECONDS, f"exit took {seconds:.1f} s after the trigger:\n{output}"
    assert STUCK_THREAD_WARNING not in output


def test_ductline_runs_exits_promptly(db_url: str, tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-m", "ductline", "runs"], env=_env(db_url), cwd=tmp_path,
                          text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        assert proc.stdout is not None
        # The table's header line is the command's first output; the rest follows at once.
        seconds, output = _seconds_from_line_to_exit(proc, proc.stdout, "pipeline")
    assert proc.returncode == 0, output
    assert seconds < EXIT_BOUND_SECONDS, f"exit took {seconds:.1f} s after the table:\n{output}"
    assert STUCK_THREAD_WARNING not in output


def test_a_stopped_worker_exits_promptly(db_url: str, tmp_path: Path) -> None:
    app = tmp_path / "exit_app.py"
    app.write_text(TRIGGERING_SCRIPT, encoding="utf-8")
    with subprocess.Popen([sys.executable, "-m", "ductline", "worker", "--app", str(app), "--concurrency", "1"],
                          env=_env(db_url), cwd=tmp_path, text=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        assert proc.stderr is not None
        try:
            started = _lines_until(proc.stderr, " started: ")
            proc.send_signal(signal.SIGTERM)
            seconds, output = _seconds_from_line_to_exit(proc, proc.stderr, " stopped")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert proc.returncode == 0, "".join(started) + output
    assert seconds < EXIT_BOUND_SECONDS, f"exit took {seconds:.1f} s after the worker stopped:\n{output}"
    assert STUCK_THREAD_WARNING not in output


def _lines_until(stream: IO[str], marker: str) -> list[str]:
    seen: list[str] = []
    for line in stream:
        seen.append(line)
        if marker in line:
            return seen
    raise AssertionError(f"no line with {marker!r}: {''.join(seen)}")
