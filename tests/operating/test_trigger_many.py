"""`Pipeline.trigger_many`: many runs in one transaction, all or nothing, on both
backends; the runs it writes are the runs `trigger` writes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import rt_app
from helpers import start_worker, stop_worker

from ductline import PayloadTooLarge, Pipeline
from ductline.views import run_view


def any_arguments(*args):
    return list(args)


variadic = Pipeline("trigger_many_variadic").start(any_arguments)


def test_each_element_starts_one_run_in_order(store):
    handles = rt_app.chain.trigger_many([1, 2, 3], database=store)
    assert [h.created for h in handles] == [True, True, True]
    assert len({h.id for h in handles}) == 3
    views = [run_view(store, h.id) for h in handles]
    assert [v["args"] for v in views] == [[1], [2], [3]]
    for view in views:
        assert view["status"] == "pending"
        assert [(s["step"], s["status"]) for s in view["steps"]][0] == ("add_one", "pending")
    assert sorted(r["id"] for r in store.list_runs()) == sorted(h.id for h in handles)


def test_a_tuple_is_positional_arguments_and_a_list_is_one_argument(store):
    one, two = variadic.trigger_many([(1, 2), [1, 2]], database=store)
    assert run_view(store, one.id)["args"] == [1, 2]
    assert run_view(store, two.id)["args"] == [[1, 2]]


def test_it_writes_the_same_rows_as_trigger(store):
    [bulk] = rt_app.chain.trigger_many([5], database=store, priority=7, timeout=60)
    single = rt_app.chain.trigger(5, database=store, priority=7, timeout=60)
    a, b = store.get_run(bulk.id), store.get_run(single.id)
    keys = ("pipeline", "status", "args", "timeout_seconds", "priority", "idempotency_key")
    assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
    ja, jb = store.run_jobs(bulk.id), store.run_jobs(single.id)
    keys = ("step", "scope", "status", "priority", "attempts", "limit_key")
    assert [{k: j[k] for k in keys} for j in ja] == [{k: j[k] for k in keys} for j in jb]


def test_one_bad_element_writes_nothing_and_is_named_by_its_index(store):
    with pytest.raises(TypeError, match="element 2"):
        rt_app.chain.trigger_many([1, 2, {3}, 4], database=store)
    assert store.list_runs() == []


def test_an_element_over_the_payload_limit_writes_nothing(store, monkeypatch):
    monkeypatch.setenv("DUCTLINE_PAYLOAD_MAX_BYTES", "1000")
    with pytest.raises(PayloadTooLarge, match="element 1"):
        rt_app.chain.trigger_many(["small", "x" * 2000], database=store)
    assert store.list_runs() == []


def test_a_past_delay_until_writes_nothing(store):
    with pytest.raises(ValueError):
        rt_app.chain.trigger_many([1, 2], database=store,
                                  delay_until=datetime.now(timezone.utc) - timedelta(hours=1))
    assert store.list_runs() == []


@pytest.mark.parametrize("bad", ["123", b"12", {"a": 1}, 7])
def test_args_list_must_be_an_iterable_of_elements(store, bad):
    with pytest.raises(TypeError, match="args_list"):
        rt_app.chain.trigger_many(bad, database=store)
    assert store.list_runs() == []


def test_no_elements_start_no_runs(store):
    assert rt_app.chain.trigger_many([], database=store) == []
    assert store.list_runs() == []


def test_a_delay_holds_every_run(store):
    handles = rt_app.chain.trigger_many([1, 2], database=store, delay=3600)
    for handle in handles:
        [job] = store.run_jobs(handle.id)
        run = store.get_run(handle.id)
        assert job["not_before_ms"] >= run["created_ms"] + 3_599_000


def test_a_worker_runs_them_all_to_completion(store, db_url):
    handles = rt_app.chain.trigger_many(list(range(30)), database=store)
    worker = start_worker(db_url)
    try:
        for handle in handles:
            assert handle.wait(60) == "completed"
    finally:
        stop_worker(worker)
    # chain: add_one, double, async_square
    assert [h.output() for h in handles] == [((i + 1) * 2) ** 2 for i in range(30)]
