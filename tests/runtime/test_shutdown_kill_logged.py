"""A worker stopped while attempts run logs, for each attempt it killed at the end of
its shutdown grace and released, one line naming the run, the step and the attempt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import rt_app
from helpers import APP, FAST_ENV, wait_for

GRACE_SECONDS = 0.5


def test_each_attempt_killed_and_released_at_the_stop_is_logged(store, db_url, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    env = {**os.environ, **FAST_ENV, "DUCTLINE_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS),
           "DUCTLINE_KILL_GRACE_SECONDS": "0.2"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ductline", "--log-format", "json", "worker", "--app", APP,
                                 "--database", db_url, "--concurrency", "2"], env=env, stderr=out)
    try:
        handles = [rt_app.busy.trigger(600, database=store) for _ in range(2)]  # each naps ten minutes
        wait_for(lambda: all(any(a["result"] is None for a in store.run_attempts(h.id)) for h in handles),
                 timeout=60)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    killed = [line for line in lines if line["message"].startswith("Attempt killed at the end of the shutdown grace")]
    assert sorted((k["run_id"], k["attempt"]) for k in killed) == sorted((h.id, 1) for h in handles), lines
    for k in killed:
        assert k["level"] == "WARNING" and k["message"].endswith("released to run again")
        assert k["step"] == store.run_jobs(k["run_id"])[0]["step"]
    for handle in handles:
        handle.cancel()
