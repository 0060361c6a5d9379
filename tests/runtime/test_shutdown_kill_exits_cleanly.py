"""A worker whose attempt outlives the shutdown grace kills it, records it released
and exits on its own: its row says ``stopped`` and the exit guard never ends it
(the guard once judged the moment between that recording and the worker's last
write "nothing runs" and ended the process there, leaving the row ``stopping``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import rt_app
from helpers import APP, FAST_ENV, wait_for

from ductline.model.outcomes import RELEASED_TYPE

GRACE_SECONDS = 0.5


def test_a_worker_that_kills_at_the_end_of_its_grace_stops_cleanly(store, db_url, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    env = {**os.environ, **FAST_ENV, "DUCTLINE_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS),
           "DUCTLINE_KILL_GRACE_SECONDS": "0.2"}
    for round_ in range(3):  # the race was lost most of the time: three tries show it
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "ductline", "worker", "--app", APP, "--database", db_url,
                                     "--concurrency", "1"], env=env, stderr=out)
        try:
            handle = rt_app.busy.trigger(600, database=store)  # naps ten minutes
            wait_for(lambda: any(a["result"] is None for a in store.run_attempts(handle.id)), timeout=60)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = log.read_text(encoding="utf-8", errors="replace")
        assert "still not stopped" not in text, text
        assert "stopped" in text.splitlines()[-1], text
        [attempt] = store.run_attempts(handle.id)
        assert (attempt["result"], attempt["error_type"]) == ("cancelled", RELEASED_TYPE)
        assert {w["status"] for w in store.list_workers()} == {"stopped"}, (round_, store.list_workers())
        handle.cancel()
