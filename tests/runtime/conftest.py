"""Real worker processes for runtime tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

APP = str(Path(__file__).parent.parent / "apps" / "rt_app.py")

FAST_ENV = {
    "DUCTLINE_RETRY_DELAY": "0",
    "DUCTLINE_LEASE_SECONDS": "3",
    "DUCTLINE_HEALTH_CHECK_INTERVAL": "0.5",
    "DUCTLINE_POLL_INTERVAL": "0.2",
    "DUCTLINE_SHUTDOWN_GRACE_SECONDS": "5",
}


def start_worker(db_url: str, *, concurrency: int = 2, env: dict[str, str] | None = None,
                 app: str = APP) -> subprocess.Popen[bytes]:
    full_env = dict(os.environ, **FAST_ENV, **(env or {}))
    return subprocess.Popen(
        [sys.executable, "-m", "ductline", "worker", "--app", app, "--database", db_url,
         "--concurrency", str(concurrency)],
        env=full_env,
    )


def stop_worker(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 15) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


@pytest.fixture
def workers(db_url: str, store: object) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """``workers(concurrency=2, env=None)`` starts a real worker process; all are
    stopped at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def start(**kwargs: object) -> subprocess.Popen[bytes]:
        proc = start_worker(db_url, **kwargs)  # type: ignore[arg-type]
        started.append(proc)
        return proc

    yield start
    for proc in started:
        stop_worker(proc)
