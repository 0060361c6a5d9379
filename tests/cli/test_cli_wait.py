"""``ductline wait RUN_ID`` watches a run another command started until it settles,
with a real worker, and exits as ``ductline run`` does: 0 completed, 1 otherwise;
124 when --timeout passes first (the run goes on)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import rt_app
from helpers import FAST_ENV


def _wait(db_url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ductline", "wait", *args, "--database", db_url],
                            env={**os.environ, **FAST_ENV, "COLUMNS": "200"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_wait_follows_a_run_to_its_completion_by_a_prefix(store, db_url, workers) -> None:
    handle = rt_app.chain.trigger(3, database=store)
    waiting = _wait(db_url, handle.id[:8], "--json")  # started before any worker: it must wait
    workers(concurrency=1)
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    line = json.loads(out.strip().splitlines()[-1])
    assert line["run_id"] == handle.id and line["status"] == "completed"
    assert line["output"] == handle.result(timeout=5)
    assert f"run {handle.id}: completed" in err


def test_wait_exits_1_for_a_halted_run_and_names_the_step(store, db_url, workers, tmp_path) -> None:
    handle = rt_app.failing.trigger(1, database=store)
    waiting = _wait(db_url, handle.id)
    workers(concurrency=1, env={"RT_HALT_FILE": str(tmp_path / "halted")})
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 1, err
    assert f"run {handle.id}: halted" in err
    assert "always_fails" in err and "ductline retry" in err


def test_wait_timeout_exits_124_and_leaves_the_run(store, db_url) -> None:
    handle = rt_app.busy.trigger(600, database=store)  # no worker: it stays pending
    waiting = _wait(db_url, handle.id, "--timeout", "1")
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 124, err
    assert f"run {handle.id} is still pending after 1" in err
    assert handle.status() == "pending"
