"""`ductline show` and the JSON API's run view list an expand's step runs in element
order, whatever instant each was inserted at: a worker with free slots takes the
first elements as they are created (handed over), and inserts them after the rest."""

from __future__ import annotations

import json
import subprocess
import sys

import rt_app
from helpers import wait_for

from ductline.handle import RunHandle
from ductline.web import runview
from ductline.web.reader import DashboardReader

ELEMENTS = 120


def test_an_expand_is_shown_in_element_order(db_url, store, workers):
    workers(concurrency=4)
    handle = rt_app.fan.trigger(ELEMENTS, database=store)
    assert RunHandle(handle.id, store).wait(120) == "completed"
    jobs = store.run_jobs(handle.id)
    created = {j["created_ms"] for j in jobs if j["step"] == "slow_square"}
    shown = subprocess.run([sys.executable, "-m", "ductline", "show", handle.id, "--json", "--database", db_url],
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    for steps in (json.loads(shown.stdout)["steps"], runview.build(DashboardReader(store), handle.id)["steps"]):
        assert [s["step"] for s in steps] == ["make_list", *["slow_square"] * ELEMENTS, "gather"], created
        assert [s["index"] for s in steps if s["step"] == "slow_square"] == list(range(ELEMENTS)), created
