"""A worker whose running attempt is cancelled by an operator logs it at INFO, with
what the cancel recorded, not as a lost lease (a WARNING kept for a real loss: a
rescue after missed renewals)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import rt_app
from helpers import APP, FAST_ENV, wait_for


def test_a_cancelled_attempt_is_logged_at_info_with_the_reason(store, db_url, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ductline", "--log-format", "json", "worker", "--app", APP,
                                 "--database", db_url, "--concurrency", "1"], env={**os.environ, **FAST_ENV},
                                stderr=out)

    def lines() -> list[dict]:
        return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("{")]

    def stopped() -> list[dict]:
        return [line for line in lines() if line["message"].startswith("Attempt stopped by its run")]

    try:
        handle = rt_app.busy.trigger(600, database=store)  # naps ten minutes
        wait_for(lambda: any(a["result"] is None for a in store.run_attempts(handle.id)), timeout=60)
        handle.cancel()
        wait_for(stopped, timeout=60)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (line,) = stopped()
    assert line["level"] == "INFO" and line["run_id"] == handle.id and line["attempt"] == 1, line
    assert line["message"] == "Attempt stopped by its run (the run was cancelled); killed it", line
    assert not [x for x in lines() if x["message"].startswith("Lease lost")], lines()
