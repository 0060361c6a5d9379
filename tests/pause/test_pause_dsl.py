"""`.pause(before=step, timeout=None)`: validated when the pipeline is defined, one
test per rule; and `ductline.execute` refuses a pause that nothing would resume."""

from __future__ import annotations

from datetime import timedelta

import pause_app
import pytest
from pause_app import approve, finish, prepare

import ductline
from ductline import DefinitionError, Pipeline


def three(name: str) -> Pipeline:
    return Pipeline(name).start(prepare).chain(to=approve).chain(to=finish)


def test_a_pause_is_recorded_by_name_or_callable_with_its_timeout_in_seconds():
    by_callable = three("pause_dsl_callable").pause(before=approve)
    by_name = three("pause_dsl_name").pause(before="finish", timeout=timedelta(minutes=5))
    assert by_callable.definition().pauses == {"approve": None}
    assert by_name.definition().pauses == {"finish": 300}
    assert pause_app.expiring.definition().pauses == {"approve": 1}


def test_pause_returns_the_cursor_so_transitions_chain_on():
    pipeline = Pipeline("pause_dsl_chain_on").start(prepare).chain(to=approve).pause(before=approve).chain(to=finish)
    definition = pipeline.definition()
    assert definition.pauses == {"approve": None}
    assert definition.nodes["approve"].next.targets == ("finish",)


def test_an_unknown_step_name_is_refused():
    with pytest.raises(DefinitionError) as caught:
        three("pause_dsl_unknown_name").pause(before="aprove")
    assert str(caught.value) == ("pause(before='aprove'): pipeline 'pause_dsl_unknown_name' has no step "
                                 "named 'aprove' (add the step before pausing before it)")


def test_a_callable_that_is_not_a_step_of_the_pipeline_is_refused():
    with pytest.raises(DefinitionError) as caught:
        Pipeline("pause_dsl_unknown_callable").start(prepare).chain(to=approve).pause(before=finish)
    assert str(caught.value) == ("pause(before=finish): pipeline 'pause_dsl_unknown_callable' has no step "
                                 "running finish (add the step before pausing before it)")


def test_a_callable_used_by_several_steps_must_be_named():
    pipeline = Pipeline("pause_dsl_ambiguous").start(prepare).chain(to=approve).chain(to=approve, name="again")
    with pytest.raises(DefinitionError) as caught:
        pipeline.pause(before=approve)
    assert str(caught.value) == ("pause(before=approve): steps ['approve', 'again'] all run approve; "
                                 "name the one to pause before")
    assert pipeline.pause(before="again").definition().pauses == {"again": None}


def test_the_start_step_cannot_be_paused_before():
    with pytest.raises(DefinitionError) as caught:
        three("pause_dsl_start").pause(before=prepare)
    assert str(caught.value) == ("pause(before='prepare'): 'prepare' is the start step; a run cannot pause "
                                 "before it starts (trigger it later, or pause before a later step)")


def test_a_second_pause_before_the_same_step_is_refused():
    pipeline = three("pause_dsl_twice").pause(before=approve, timeout=60)
    with pytest.raises(DefinitionError) as caught:
        pipeline.pause(before="approve")
    assert str(caught.value) == "pipeline 'pause_dsl_twice' already pauses before step 'approve'"


def test_before_must_be_a_name_or_a_callable():
    with pytest.raises(TypeError) as caught:
        three("pause_dsl_before_type").pause(before=2)
    assert str(caught.value) == "pause(before=...) takes a step's name or its callable, not int (2)"


@pytest.mark.parametrize("timeout, error, message", [
    (1.5, TypeError, "pause timeout must be an int number of seconds or a datetime.timedelta, not float (1.5)"),
    ("60", TypeError, "pause timeout must be an int number of seconds or a datetime.timedelta, not str ('60')"),
    (True, TypeError, "pause timeout must be an int number of seconds or a datetime.timedelta, not bool (True)"),
    (timedelta(milliseconds=1500), TypeError,
     "pause timeout must be whole seconds, got datetime.timedelta(seconds=1, microseconds=500000)"),
    (-1, ValueError, "pause timeout must not be negative, got -1 s"),
    (0, ValueError, "pause timeout must be greater than 0 seconds"),
])
def test_a_bad_timeout_is_refused(timeout, error, message):
    pipeline = three(f"pause_dsl_timeout_{error.__name__}_{abs(hash(str(timeout)))}")
    with pytest.raises(error) as caught:
        pipeline.pause(before=approve, timeout=timeout)
    assert str(caught.value) == message
    assert pipeline.definition().pauses == {}


def test_a_pause_after_the_pipeline_was_used_is_refused():
    pipeline = three("pause_dsl_frozen")
    pipeline.definition()
    with pytest.raises(DefinitionError, match="already in use"):
        pipeline.pause(before=approve)


def test_execute_refuses_a_pause_that_nothing_would_resume():
    with pytest.raises(DefinitionError) as caught:
        ductline.execute(pause_app.chain, 7)
    assert str(caught.value) == (
        "execute() cannot run pipeline 'pause_chain': it pauses before step 'approve' without a timeout, "
        "and nothing would resume it. Pass resume={step: new_input} (ductline.handle.NO_INPUT keeps the "
        "input) or a resume callable, give the pause a timeout, or run it on a worker (trigger, then "
        "`ductline resume`)")
