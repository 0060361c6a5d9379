"""The run deadline under pressure: a 5,000-step chain runs until its deadline and
the walk skips the rest (cancel races: test_cancel_races.py)."""

from __future__ import annotations

import long_chain_app

from ductline.views import run_view


def test_a_5000_step_chain_runs_until_its_deadline_and_skips_the_rest(store, workers):
    workers(app=long_chain_app.__file__)
    handle = long_chain_app.long_chain.trigger(0, database=store)
    assert handle.wait(60) == "failed"
    view = run_view(store, handle.id)
    assert view["metadata"]["timeout_exceeded"] is True
    statuses = [s["status"] for s in view["steps"]]
    assert len(statuses) == 5000  # every step recorded: done, failed, or skipped by the walk
    done = statuses.count("completed")
    assert done > 0
    assert statuses.count("skipped") == 5000 - done - statuses.count("failed")
    assert set(statuses) <= {"completed", "failed", "skipped"}
