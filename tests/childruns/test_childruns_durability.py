"""Durability of child runs: SIGKILL a real worker at each child-run checkpoint
(`ductline.faults`); a fresh worker finishes the run, every child run exists once,
and each step -- the parent's and every child's -- succeeded once."""

from __future__ import annotations

import signal

import childruns_app as app
import pytest
from helpers import start_worker, stop_worker

from ductline.views import run_view

CHILDREN = 3


def children_of(store, run_id):
    from ductline.store import children

    with store.dialect.reader() as s:
        return children.child_runs(s, run_id)


def succeeded_once(store, run_id):
    for step in run_view(store, run_id)["steps"]:
        results = [a["result"] for a in step["attempts"]]
        assert results.count("succeeded") == 1, (step["step"], results)
        assert set(results) <= {"succeeded", "crashed"}, (step["step"], results)


@pytest.mark.parametrize("checkpoint", ["children_started", "after_children_started", "before_parent_woken"])
def test_sigkill_at_a_child_run_checkpoint_loses_nothing_and_starts_nothing_twice(store, db_url, checkpoint,
                                                                                   tmp_path):
    log = tmp_path / "starts.log"
    env = {"DUCTLINE_LEASE_SECONDS": "2", "CHILDRUNS_LOG": str(log)}
    handle = app.durable.trigger(CHILDREN, database=store)
    first = start_worker(db_url, env={**env, "DUCTLINE_FAULT": checkpoint}, app=app.APP)
    assert first.wait(90) == -signal.SIGKILL
    second = start_worker(db_url, env=env, app=app.APP)
    try:
        assert handle.wait(90) == "completed"
    finally:
        stop_worker(second)
    assert handle.output() == sum(i + 1 for i in range(CHILDREN))
    kids = children_of(store, handle.id)
    assert sorted(k["child_index"] for k in kids) == list(range(CHILDREN))
    assert all(k["status"] == "completed" for k in kids)
    succeeded_once(store, handle.id)
    for k in kids:
        succeeded_once(store, k["id"])
    lines = log.read_text().splitlines()
    # A kill that rolled the start back runs the parent's step again (a loaded machine may
    # also lose a lease and run it again); however often it ran, its children exist once.
    assert lines.count(f"parent {CHILDREN}") >= (2 if checkpoint == "children_started" else 1)
