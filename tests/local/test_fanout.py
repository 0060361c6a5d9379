"""Fan-out and fan-in in the in-process executor: the rulebook's routing
(`ductline.model.routing`), as on a worker -- combine in ``to=`` order, collapse in element order
and exactly once (``[]`` for zero elements), divert on ``str(output)`` -- and the
halt policy: a step failing for good starts nothing new (waiting step runs are
held), running siblings finish."""

from __future__ import annotations

import uuid

import ductline
import local_steps as s
from ductline import Pipeline
from local_helpers import FakeClock


def name() -> str:
    return f"fanout_{uuid.uuid4().hex[:10]}"


def test_collapse_gathers_in_element_order_not_completion_order() -> None:
    pipeline = (Pipeline(name()).start(s.make_list).expand(to=s.finish_in_reverse)
                .collapse(into=s.gather))
    result = ductline.execute(pipeline, 5, concurrency=5)  # element 0 waits for the other four
    assert result.output == [0, 10, 20, 30, 40]
    elements = [r for r in result.steps if r.step == "finish_in_reverse"]
    assert [(r.index, r.scope, r.output) for r in elements] == [(i, str(i), i * 10) for i in range(5)]
    finished = [r.finished_at for r in elements]
    assert finished == sorted(finished, reverse=True), "element 4 finished first"
    assert [r.step for r in result.steps] == ["make_list"] + ["finish_in_reverse"] * 5 + ["gather"]


def test_collapse_fires_once_with_an_empty_list_for_zero_elements() -> None:
    pipeline = (Pipeline(name()).start(s.make_list).expand(to=s.square).chain(to=s.double)
                .collapse(into=s.gather).chain(to=s.identity))
    result = ductline.execute(pipeline, 0)
    assert result.overall_status == "success"
    assert result.output == []
    assert result.statuses() == {"make_list": "completed", "gather": "completed", "identity": "completed"}


def test_sync_elements_run_in_children_in_parallel_and_keep_their_order() -> None:
    pipeline = (Pipeline(name()).start(s.make_list).expand(to=s.square).chain(to=s.double)
                .collapse(into=s.gather))
    result = ductline.execute(pipeline, 6, concurrency=3)
    assert result.output == [2 * i * i for i in range(6)]
    assert [r.index for r in result.steps if r.step == "double"] == list(range(6))


def test_nested_expands() -> None:
    pipeline = (Pipeline(name()).start(s.pairs).expand(to=s.split_pair).expand(to=s.negate)
                .collapse(into=s.gather, name="inner").collapse(into=s.gather, name="outer"))
    result = ductline.execute(pipeline, 3)
    assert result.output == [[0, -10], [-1, -11], [-2, -12]]
    negated = [(r.scope, r.index, r.output) for r in result.steps if r.step == "negate"]
    assert negated == [("0/0", 0, 0), ("0/1", 1, -10), ("1/0", 0, -1), ("1/1", 1, -11),
                       ("2/0", 0, -2), ("2/1", 1, -12)]
    assert [r.scope for r in result.steps if r.step == "inner"] == ["0", "1", "2"]


def test_combine_gathers_in_to_order() -> None:
    pipeline = (Pipeline(name()).start(s.async_identity)
                .divide(to=[s.slow_tag_a, s.async_tag_b, s.tag_c]).combine(into=s.gather))
    result = ductline.execute(pipeline, "x")
    assert result.output == ["a:x", "b:x", "c:x"]
    assert [r.step for r in result.steps] == ["async_identity", "slow_tag_a", "async_tag_b", "tag_c",
                                             "gather"]


def test_a_divide_inside_an_expand_with_an_extended_branch() -> None:
    pipeline = Pipeline(name()).start(s.make_list).expand(to=s.async_identity) \
        .divide(to=[s.tag_a, s.async_tag_b])
    pipeline.branch(s.async_tag_b).chain(to=s.tag_c)
    pipeline.combine(into=s.gather, name="pair").collapse(into=s.gather, name="all")
    result = ductline.execute(pipeline, 2)
    assert result.output == [["a:0", "c:b:0"], ["a:1", "c:b:1"]]


def test_divert_routes_on_str_of_the_output() -> None:
    def build() -> Pipeline:
        return (Pipeline(name()).start(s.async_identity)
                .divert(to={"big": s.route_big, "small": s.route_small, "otherwise": s.route_other})
                .converge(into=s.async_identity, name="converged"))

    assert ductline.execute(build(), "big").output == "went big"
    assert ductline.execute(build(), "small").output == "went small"
    other = ductline.execute(build(), 12)
    assert other.output == "went otherwise"
    assert [(r.step, r.status) for r in other.steps] == [
        ("async_identity", "completed"), ("route_big", "skipped"), ("route_small", "skipped"),
        ("route_other", "completed"), ("converged", "completed")]
    assert {r.skip_reason for r in other.steps if r.status == "skipped"} == {"route not taken"}


def test_expand_of_something_else_than_a_list_halts_without_retry(clock: FakeClock) -> None:
    # The same input makes the same output: another attempt cannot fix it.
    pipeline = Pipeline(name()).start(s.not_a_list, max_retry=3).expand(to=s.square) \
        .collapse(into=s.gather)
    result = ductline.execute(pipeline, 1, clock=clock)
    step = result.step("not_a_list")
    assert step.status == "failed" and step.error_type == "ductline.ExpandNotAList" and step.attempts == 1
    assert isinstance(ductline.ExpandNotAList("x"), TypeError)
    assert "must return a list" in step.error
    assert result.metadata["halt_reason"] == "non_retryable_error"
    assert [r.step for r in result.steps] == ["not_a_list"]  # a halt records nothing it never created
    assert result.status == "halted"


def test_too_many_elements_halt_without_retry(clock: FakeClock) -> None:
    pipeline = Pipeline(name()).start(s.make_list, max_retry=3).expand(to=s.square, max_fanout=3) \
        .collapse(into=s.gather)
    result = ductline.execute(pipeline, 5, clock=clock)
    step = result.step("make_list")
    assert step.status == "failed" and step.error_type == "FanoutError" and step.attempts == 1
    assert result.metadata["halt_reason"] == "max_fanout_exceeded"


def test_halt_lets_running_siblings_finish_and_never_creates_the_fan_in() -> None:
    pipeline = (Pipeline(name()).start(s.async_identity)
                .divide(to=[s.async_fail, s.async_sleep_short], max_retry=1)
                .combine(into=s.gather).chain(to=s.double))
    result = ductline.execute(pipeline, 1)
    assert result.overall_status == "failed" and result.status == "halted"
    assert result.statuses() == {"async_identity": "completed", "async_fail": "failed",
                                 "async_sleep_short": "completed"}
    assert result.metadata["halt_reason"] == "job_retries_exhausted"
    assert result.metadata["error"].startswith("step 'async_fail' failed: ValueError")


def test_halt_starts_nothing_new() -> None:
    pipeline = Pipeline(name()).start(s.make_list).expand(to=s.fail, max_retry=1).collapse(into=s.gather)
    result = ductline.execute(pipeline, 3, concurrency=1)
    elements = [r for r in result.steps if r.step == "fail"]
    # The elements still waiting for a child are held (a retry of the run would release them).
    assert [r.status for r in elements] == ["failed", "held", "held"]
    assert [r.attempts for r in elements] == [1, 0, 0]
    assert all(r.skip_reason is None and r.finished_at is None for r in elements[1:])
    assert "gather" not in result.statuses()


def test_on_halt_receives_the_halt_reasons() -> None:
    pipeline = Pipeline(name()).start(s.async_fail, max_retry=1).on_halt(s.record_halt)
    result = ductline.execute(pipeline, "boom")
    handler = result.step("__on_halt__")
    assert handler.status == "completed"
    assert handler.output == [{"reason": "job_retries_exhausted", "step": "async_fail",
                               "error": "always fails: boom"}]
    assert result.overall_status == "failed"
