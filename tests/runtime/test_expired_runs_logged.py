"""The line about runs a worker expired past their deadline names how many and which
(the first few, then how many more)."""

from __future__ import annotations

import logging

import obs_app
from helpers import wait_for

from ductline.engine import stop

RUNS = 7


def test_the_expiry_line_names_the_count_and_the_runs(store, caplog):
    handles = [obs_app.deadline_pipeline.trigger(i, database=store) for i in range(RUNS)]
    claimed = store.claim("test-worker", ["obs_deadline"], RUNS, 60_000)  # their deadlines start
    assert len(claimed) == RUNS
    wait_for(lambda: len(store.due_deadlines()) == RUNS, timeout=10)
    with caplog.at_level(logging.INFO, logger="ductline.engine"):
        assert stop.expire_due(store, {"obs_deadline": obs_app.deadline_pipeline.definition()}) == RUNS
    [line] = [r.getMessage() for r in caplog.records if "past their deadline" in r.getMessage()]
    head, _, named = line.partition(": ")
    assert head == f"Expired {RUNS} run(s) past their deadline"
    ids, _, more = named.partition(" and ")
    assert more == f"{RUNS - stop.NAMED_RUNS} more"
    assert len(set(ids.split(", "))) == stop.NAMED_RUNS and set(ids.split(", ")) <= {h.id for h in handles}


def test_a_few_runs_are_all_named():
    assert stop.expired_message(["a1", "b2"]) == "Expired 2 run(s) past their deadline: a1, b2"
    assert stop.expired_message([f"r{i}" for i in range(6)]) == \
        "Expired 6 run(s) past their deadline: r0, r1, r2, r3, r4 and 1 more"
