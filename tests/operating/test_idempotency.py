"""Idempotency keys: ``trigger(..., key=...)`` starts at most one active run per
(pipeline, key), also when triggers race in several processes, on both backends."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import rt_app
from helpers import APP, ductline_in_process

from ductline.views import run_view


def test_a_second_trigger_with_the_key_returns_the_active_run(store):
    first = rt_app.chain.trigger(1, database=store, key="order-42")
    again = rt_app.chain.trigger(2, database=store, key="order-42")
    assert first.created and not again.created
    assert again.id == first.id
    assert [r["id"] for r in store.list_runs()] == [first.id]
    assert len(store.run_jobs(first.id)) == 1  # the refused trigger wrote no job either
    view = run_view(store, first.id)
    assert view["key"] == "order-42" and view["args"] == [1]


def test_keys_are_scoped_per_pipeline_and_runs_without_a_key_are_free(store):
    a = rt_app.chain.trigger(1, database=store, key="k")
    b = rt_app.flaky_pipeline.trigger(1, database=store, key="k")
    assert a.created and b.created and a.id != b.id
    c, d = rt_app.chain.trigger(1, database=store), rt_app.chain.trigger(1, database=store)
    assert c.id != d.id and run_view(store, c.id)["key"] is None


def test_a_finished_run_releases_its_key(store):
    first = rt_app.chain.trigger(1, database=store, key="nightly")
    first.cancel()
    assert first.status() == "cancelled"
    second = rt_app.chain.trigger(1, database=store, key="nightly")
    assert second.created and second.id != first.id
    assert rt_app.chain.trigger(1, database=store, key="nightly").id == second.id


@pytest.mark.parametrize("key, error", [(7, TypeError), ("", ValueError), ("a\x00b", ValueError),
                                        ("zz\ud800", ValueError),  # else the same key as "zz\\ud800"
                                        ("x" * 1001, ValueError)])
def test_an_invalid_key_is_refused_before_anything_is_written(store, key, error):
    with pytest.raises(error):
        rt_app.chain.trigger(1, database=store, key=key)
    assert store.list_runs() == []


RACER = """
import sys
sys.path.insert(0, {apps!r})
import rt_app
from ductline.store import open_store
store = open_store({url!r})
print(rt_app.chain.trigger(1, database=store, key="race").id)
"""


def test_racing_triggers_in_several_processes_start_exactly_one_run(db_url, store):
    code = RACER.format(apps=str(APP.rpartition("/")[0]), url=db_url)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) for _ in range(6)]
    ids = {p.communicate(timeout=60)[0].decode().strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(ids) == 1
    assert [r["id"] for r in store.list_runs()] == list(ids)


def test_cli_trigger_with_key_reports_the_existing_run(db_url, store):
    def trigger() -> dict:
        done = ductline_in_process("trigger", f"{APP}:chain", "--args", "[3]", "--key", "cli-key", "--json",
                                   "--database", db_url)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first, second = trigger(), trigger()
    assert first["created"] is True and second == {"run_id": first["run_id"], "created": False}
