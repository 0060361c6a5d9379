"""Child runs with real worker processes on both backends: a step starts runs of
another pipeline and its run goes on with their outputs; failures under each
policy; a cancel and the run deadline reach the children; nested children. The tests
that look only at their own runs share one worker per backend (`shared_worker`);
those that read gauges over the whole database or need more slots start their own."""

from __future__ import annotations

import json
import time

import childruns_app as app
from helpers import shared_worker_fixture, wait_for

from ductline.observability.metrics import AWAITING, CHILDREN, ChildCounts, Registry
from ductline.store import Store

shared_worker = shared_worker_fixture(app.APP)


def jobs(store: Store, run_id: str) -> dict[str, dict]:
    return {j["step"]: j for j in store.run_jobs(run_id)}


def children_of(store: Store, run_id: str) -> list[dict]:
    from ductline.store import children

    with store.dialect.reader() as s:
        return children.child_runs(s, run_id)


def test_a_step_starts_children_and_its_run_goes_on_with_their_outputs_in_order(shared_store, shared_worker):
    handle = app.parents.trigger(4, database=shared_store)
    assert handle.wait(90) == "completed"
    assert handle.output() == 0 + 1 + 4 + 9
    fan = jobs(shared_store, handle.id)["fan"]
    assert json.loads(fan["output"]) == [0, 1, 4, 9]
    kids = children_of(shared_store, handle.id)
    assert [k["child_index"] for k in kids] == [0, 1, 2, 3]
    assert {(k["pipeline"], k["status"], k["parent_step"]) for k in kids} == {
        ("childruns_square", "completed", "fan")}
    attempts = [a for a in shared_store.run_attempts(handle.id) if a["job_id"] == fan["id"]]
    assert [a["result"] for a in attempts] == ["succeeded"]  # one attempt: the wait held no slot


def test_children_by_pipeline_name_and_none_at_all(shared_store, shared_worker):
    named = app.named.trigger(3, database=shared_store)
    empty = app.empty.trigger(1, database=shared_store)
    assert named.wait(90) == "completed" and named.output() == 0 + 1 + 4
    assert empty.wait(90) == "completed" and empty.output() == 0


def test_a_waiting_parent_is_one_row_without_a_lease(store, workers):
    workers(app=app.APP, concurrency=2)
    handle = app.waiting.trigger(2, database=store)
    wait_for(lambda: len(children_of(store, handle.id)) == 2
             and all(k["status"] == "running" for k in children_of(store, handle.id)), 30)
    fan = jobs(store, handle.id)["fan_slow"]
    assert fan["status"] == "awaiting"
    assert store.lease_state(fan["id"]) == {"status": "awaiting", "lease_token": None}
    assert handle.status() == "running"
    # the gauges of waiting parents and of child runs not yet ended (metrics)
    registry = Registry(child_source=ChildCounts(store, cache_seconds=0))
    gauges = registry.gauges()
    assert gauges[AWAITING] == {("childruns_waiting",): 1.0}
    assert gauges[CHILDREN] == {("childruns_slow",): 2.0}
    handle.cancel()
    wait_for(lambda: all(k["status"] == "cancelled" for k in children_of(store, handle.id)), 30)
    assert jobs(store, handle.id)["fan_slow"]["status"] == "skipped"
    gauges = registry.gauges()  # pipelines seen once read 0
    assert (gauges[AWAITING], gauges[CHILDREN]) == ({("childruns_waiting",): 0.0}, {("childruns_slow",): 0.0})


def test_on_failure_fail_halts_the_parent_with_the_childs_error(shared_store, shared_worker):
    handle = app.strict.trigger(1, database=shared_store)
    assert handle.wait(90) == "halted"
    run = shared_store.get_run(handle.id)
    assert run["halt_reason"] == "child_run_failed"
    kids = children_of(shared_store, handle.id)
    failed = [k for k in kids if k["pipeline"] == "childruns_failing"][0]
    fan = jobs(shared_store, handle.id)["fan_failing"]
    assert fan["status"] == "failed"
    assert fan["skip_reason"].startswith(f"child run {failed['id']} of pipeline 'childruns_failing' ended halted")
    assert "ValueError" in fan["skip_reason"] or "no 2" in fan["skip_reason"]
    assert "total" not in jobs(shared_store, handle.id)


def test_on_failure_collect_hands_the_failures_to_the_next_step(shared_store, shared_worker):
    handle = app.mixed.trigger(1, database=shared_store)
    assert handle.wait(90) == "completed"
    assert handle.output() == [1, "halted:job_retries_exhausted", 9]


def test_cancelling_the_parent_cancels_its_children(store, workers):
    workers(app=app.APP, concurrency=4)
    handle = app.waiting.trigger(3, database=store)
    wait_for(lambda: sum(k["status"] == "running" for k in children_of(store, handle.id)) == 3, 30)
    handle.cancel()
    wait_for(lambda: all(k["status"] == "cancelled" for k in children_of(store, handle.id)), 30)
    assert handle.status() == "cancelled"


def test_the_run_deadline_reaches_the_children(store, workers):
    workers(app=app.APP, concurrency=4)
    handle = app.short.trigger(2, database=store)
    assert handle.wait(90) == "failed"
    assert json.loads(store.get_run(handle.id)["metadata"])["timeout_exceeded"] is True
    wait_for(lambda: all(k["status"] == "cancelled" for k in children_of(store, handle.id)), 30)


def test_children_nest_and_their_outputs_come_back_up(shared_store, shared_worker):
    handle = app.nested.trigger(3, database=shared_store)
    assert handle.wait(90) == "completed"
    assert handle.output() == (0 + 1 + 4) + 9
    kids = children_of(shared_store, handle.id)
    inner = [k for k in kids if k["pipeline"] == "childruns_parent"][0]
    assert len(children_of(shared_store, inner["id"])) == 3


def test_a_retried_parent_finds_its_children_and_starts_none_again(shared_store, shared_worker):
    handle = app.strict.trigger(1, database=shared_store)
    assert handle.wait(90) == "halted"
    first = sorted(k["id"] for k in children_of(shared_store, handle.id))
    from ductline.operations.revive import retry_run

    retry_run(shared_store, handle.id)
    wait_for(lambda: len(shared_store.run_attempts(handle.id)) == 2, 30)
    assert handle.wait(90) == "halted"  # the same failed child: the parent fails again
    assert sorted(k["id"] for k in children_of(shared_store, handle.id)) == first
    fan = jobs(shared_store, handle.id)["fan_failing"]
    assert [a["result"] for a in shared_store.run_attempts(handle.id) if a["job_id"] == fan["id"]] == [
        "succeeded", "succeeded"]


def test_a_child_pipeline_the_recording_process_does_not_define_is_the_attempts_error():
    import ductline

    result = ductline.execute(app.unknown, 1)
    assert result.status == "halted"
    step = result.step("fan_unknown")
    assert step.error_type == "PipelineNotFound"
    assert "childruns_no_such_pipeline" in step.error
