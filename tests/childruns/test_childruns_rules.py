"""The child-run rules (`ductline.model.children`) and values (`ductline.childruns`):
when a parent's wait is over and what it becomes, ids, the marker, bad input."""

from __future__ import annotations

import json

import childruns_app as app
import pytest

import ductline
from ductline import codec
from ductline.model.children import Child, child_run_id, starts_children, wake
from ductline.model.states import RunStatus


def kid(i: int, status: RunStatus, output: str | None = None, reason: str | None = None,
        metadata: dict | None = None) -> Child:
    return Child(f"r{i}", "p", status, output, reason, metadata or {})


def test_a_parent_waits_while_any_child_is_active():
    for status in (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED):
        assert wake([kid(0, RunStatus.COMPLETED, "1"), kid(1, status)], "fail") is None


def test_all_completed_gives_their_outputs_in_order():
    found = wake([kid(0, RunStatus.COMPLETED, "1"), kid(1, RunStatus.COMPLETED, '{"a":[2]}')], "fail")
    assert found is not None and found.error is None
    assert json.loads(found.output) == [1, {"a": [2]}]
    assert wake([], "fail").output == "[]"


@pytest.mark.parametrize("status, reason, metadata, shown", [
    (RunStatus.HALTED, "job_retries_exhausted", {"error": "ValueError: no"}, "ValueError: no"),
    (RunStatus.FAILED, None, {"timeout_exceeded": True}, "timeout_exceeded"),
    (RunStatus.CANCELLED, None, {}, "cancelled"),
])
def test_fail_policy_fails_the_step_naming_the_first_child_that_did_not_complete(status, reason, metadata, shown):
    found = wake([kid(0, RunStatus.COMPLETED, "1"), kid(1, status, None, reason, metadata),
                  kid(2, RunStatus.CANCELLED)], "fail")
    assert found is not None and found.output is None
    assert found.error == f"child run r1 of pipeline 'p' ended {status.value}: {shown} (and 1 more)"


def test_collect_policy_puts_a_child_run_failed_in_place():
    found = wake([kid(0, RunStatus.COMPLETED, "1"), kid(1, RunStatus.HALTED, None, "unsafe_to_retry",
                                                        {"error": "boom"})], "collect")
    assert found is not None and found.error is None
    assert codec.loads(found.output) == [1, ductline.ChildRunFailed("r1", "p", "halted", "unsafe_to_retry", "boom")]


def test_child_run_ids_are_stable_per_parent_job_and_index():
    assert child_run_id("job", 0) == child_run_id("job", 0)
    assert len({child_run_id("job", 0), child_run_id("job", 1), child_run_id("other", 0)}) == 3
    assert len(child_run_id("job", 0)) == 32


def test_the_marker_is_recognised_by_its_prefix_only():
    assert starts_children(codec.dumps(ductline.children([ductline.child(app.squares, 1)])))
    assert not starts_children(codec.dumps({"children": []}))
    assert not starts_children(None)
    with pytest.raises(TypeError, match="reserved by ductline"):
        codec.dumps({"__ductline__": "children"})


def test_bad_children_are_refused_where_the_step_runs():
    with pytest.raises(ValueError, match="on_failure must be 'fail' or 'collect'"):
        ductline.children([], on_failure="ignore")
    with pytest.raises(TypeError, match="takes a list"):
        ductline.children(ductline.child(app.squares, 1))
    with pytest.raises(TypeError, match="run 0 is a int"):
        ductline.children([3])
    with pytest.raises(TypeError, match="Pipeline or a pipeline's name"):
        ductline.child(3)
    with pytest.raises(TypeError, match="square"):
        ductline.child(app.squares, 1, 2)  # square takes one argument
    with pytest.raises(ValueError):
        ductline.child(app.squares, 1, timeout=0)
    with pytest.raises(TypeError, match="does not round-trip"):
        codec.dumps(ductline.children([ductline.child(app.squares, object())]))


def test_pairs_and_names_are_accepted():
    made = ductline.children([(app.squares, (1,)), ductline.child("childruns_square", 2, timeout=5)])
    assert [(r.pipeline, r.args, r.timeout_seconds) for r in made.runs] == [
        ("childruns_square", (1,), None), ("childruns_square", (2,), 5)]
