"""The first Ctrl-C of `ductline run` with an attempt running says what it waits for,
how long, and that a second Ctrl-C stops at once (a silent wait of the grace reads
like a hang); the second one does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HANGING_APP = '''import pathlib
import time

from ductline import Pipeline


def hang(marker):
    pathlib.Path(marker).write_text("started")
    time.sleep(1000)


p = Pipeline("hangs").start(hang, timeout=600)
'''


def wait_for(condition, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_first_ctrl_c_says_how_long_it_waits_and_that_a_second_stops_now(tmp_path: Path) -> None:
    (tmp_path / "h.py").write_text(HANGING_APP)
    marker = tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-m", "ductline", "run", "h.py:p", "--args", f'["{marker}"]',
                             "--database", f"sqlite:///{tmp_path / 'd.db'}"], cwd=tmp_path, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True,
                            env={**os.environ, "DUCTLINE_SHUTDOWN_GRACE_SECONDS": "300"})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        wait_for(marker.exists, "the step never started")
        proc.send_signal(signal.SIGINT)
        wait_for(lambda: any("Worker stopping" in line for line in lines), "no line on the first Ctrl-C")
        [said] = [line for line in lines if "Worker stopping" in line]
        assert ("Worker stopping: no new claims, 1 attempt(s) running (hang); waiting up to 300 s "
                "(shutdown_grace_seconds) for them to finish; Ctrl-C again stops them now") in said, said
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130  # well before the 300 s grace
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
        proc.stderr.close()
