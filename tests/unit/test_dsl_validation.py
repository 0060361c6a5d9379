"""Definition-time validation of the DSL (DESIGN.md, "The DSL"), and the rule that a
trigger with bad arguments raises before anything is written ("Bad input gets a
clear error")."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest

import steps_for_tests as S
from ductline import DefinitionError, Pipeline
from ductline.dsl.options import DEFAULT_MAX_CRASH, DEFAULT_MAX_RETRY
from ductline.durations import optional_seconds, to_seconds

TRANSITIONS = ["start", "chain", "divide", "combine", "expand", "collapse", "divert", "converge"]
DURATION_OPTIONS = ["timeout", "delay", "retry_delay"]


def build_with(transition: str, **opts: Any) -> tuple[Pipeline, list[str]]:
    """A complete pipeline whose ``transition`` call gets ``opts``; returns it and
    the names of the steps that call created (the ones carrying the options)."""
    p = Pipeline(S.unique_name("opts"))
    if transition == "start":
        p.start(S.a, **opts)
        return p, ["a"]
    p.start(S.a)
    if transition == "chain":
        p.chain(to=S.b, **opts)
        return p, ["b"]
    if transition == "divide":
        p.divide(to=[S.b, S.c], **opts).combine(into=S.h)
        return p, ["b", "c"]
    if transition == "combine":
        p.divide(to=[S.b, S.c]).combine(into=S.d, **opts)
        return p, ["d"]
    if transition == "expand":
        p.expand(to=S.b, **opts).collapse(into=S.h)
        return p, ["b"]
    if transition == "collapse":
        p.expand(to=S.b).collapse(into=S.c, **opts)
        return p, ["c"]
    if transition == "divert":
        p.divert(to={"x": S.b, "otherwise": S.c}, **opts).converge(into=S.h)
        return p, ["b", "c"]
    if transition == "converge":
        p.divert(to={"x": S.b, "otherwise": S.c}).converge(into=S.d, **opts)
        return p, ["d"]
    raise AssertionError(transition)


# ---------------------------------------------------------------------------------
# durations on every transition
# ---------------------------------------------------------------------------------

BAD_TYPES = [
    pytest.param(1.5, id="float"),
    pytest.param(30.0, id="integral-float"),
    pytest.param("30", id="str-digits"),
    pytest.param("30s", id="str-unit"),
    pytest.param(True, id="bool-true"),
    pytest.param(False, id="bool-false"),
    pytest.param([30], id="list"),
]


@pytest.mark.parametrize("value", BAD_TYPES)
@pytest.mark.parametrize("option", DURATION_OPTIONS)
@pytest.mark.parametrize("transition", TRANSITIONS)
def test_duration_of_wrong_type_is_type_error(transition: str, option: str, value: Any) -> None:
    with pytest.raises(TypeError, match=rf"^{option} must be an int number of seconds or a datetime\.timedelta"):
        build_with(transition, **{option: value})


@pytest.mark.parametrize("value", [timedelta(seconds=1.5), timedelta(milliseconds=1),
                                   timedelta(minutes=1, microseconds=1)], ids=["1.5s", "1ms", "1m+1us"])
@pytest.mark.parametrize("option", DURATION_OPTIONS)
@pytest.mark.parametrize("transition", TRANSITIONS)
def test_timedelta_with_fraction_of_second_is_type_error(transition: str, option: str, value: timedelta) -> None:
    with pytest.raises(TypeError, match=rf"^{option} must be whole seconds"):
        build_with(transition, **{option: value})


@pytest.mark.parametrize("value", [-1, -3600, timedelta(seconds=-1), timedelta(days=-1)],
                         ids=["-1", "-3600", "td-1s", "td-1d"])
@pytest.mark.parametrize("option", DURATION_OPTIONS)
@pytest.mark.parametrize("transition", TRANSITIONS)
def test_negative_duration_is_value_error(transition: str, option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"^{option} must not be negative"):
        build_with(transition, **{option: value})


@pytest.mark.parametrize("value", [0, timedelta(0)], ids=["int", "timedelta"])
@pytest.mark.parametrize("transition", TRANSITIONS)
def test_timeout_zero_is_value_error(transition: str, value: Any) -> None:
    with pytest.raises(ValueError, match=r"^timeout must be greater than 0 seconds"):
        build_with(transition, timeout=value)


@pytest.mark.parametrize("option", ["delay", "retry_delay"])
@pytest.mark.parametrize("transition", TRANSITIONS)
def test_zero_delay_and_zero_retry_delay_are_allowed(transition: str, option: str) -> None:
    p, names = build_with(transition, **{option: 0})
    definition = p.definition()
    for name in names:
        assert getattr(definition.nodes[name].options, option) == 0


@pytest.mark.parametrize("value,seconds", [
    (timedelta(minutes=1), 60),
    (timedelta(hours=2), 7200),
    (timedelta(days=1, seconds=5), 86405),
    (timedelta(milliseconds=3000), 3),
    (45, 45),
], ids=["1m", "2h", "1d5s", "3000ms", "int"])
@pytest.mark.parametrize("option", DURATION_OPTIONS)
@pytest.mark.parametrize("transition", TRANSITIONS)
def test_whole_second_duration_stored_as_int_seconds(transition: str, option: str, value: Any,
                                                     seconds: int) -> None:
    p, names = build_with(transition, **{option: value})
    definition = p.definition()
    for name in names:
        stored = getattr(definition.nodes[name].options, option)
        assert stored == seconds
        assert type(stored) is int


@pytest.mark.parametrize("transition", TRANSITIONS)
def test_options_default_when_not_given(transition: str) -> None:
    p, names = build_with(transition)
    for name in names:
        options = p.definition().nodes[name].options
        assert options.timeout is None
        assert options.delay == 0
        assert options.retry_delay is None
        assert options.max_retry == DEFAULT_MAX_RETRY == 3
        assert options.max_crash == DEFAULT_MAX_CRASH == 10
        assert options.isolation == "process"


@pytest.mark.parametrize("option", DURATION_OPTIONS)
def test_explicit_none_option_means_not_set(option: str) -> None:
    p, _ = build_with("chain", **{option: None})
    options = p.definition().nodes["b"].options
    assert getattr(options, option) == (0 if option == "delay" else None)


@pytest.mark.parametrize("value", [None, 1.5, "5", True, b"5"], ids=["None", "float", "str", "bool", "bytes"])
def test_to_seconds_where_a_value_is_required_rejects_non_durations(value: Any) -> None:
    with pytest.raises(TypeError, match=r"^delay must be an int number of seconds"):
        to_seconds(value, field="delay")


def test_optional_seconds_passes_none_through() -> None:
    assert optional_seconds(None, field="timeout", allow_zero=False) is None
    assert optional_seconds(timedelta(minutes=1), field="timeout") == 60


def test_to_seconds_messages_name_type_and_value() -> None:
    with pytest.raises(TypeError) as info:
        to_seconds(2.5, field="retry_delay")
    assert "not float (2.5)" in str(info.value)
    with pytest.raises(ValueError) as info2:
        to_seconds(-7, field="retry_delay")
    assert "got -7 s" in str(info2.value)


# -- Pipeline(timeout=) -------------------------------------------------------------

@pytest.mark.parametrize("value", BAD_TYPES + [pytest.param(timedelta(seconds=0.5), id="td-fraction")])
def test_pipeline_timeout_wrong_type_is_type_error(value: Any) -> None:
    with pytest.raises(TypeError, match=r"^timeout must be"):
        Pipeline(S.unique_name("pt"), timeout=value)


@pytest.mark.parametrize("value", [-1, timedelta(seconds=-10)], ids=["int", "timedelta"])
def test_pipeline_timeout_negative_is_value_error(value: Any) -> None:
    with pytest.raises(ValueError, match=r"^timeout must not be negative"):
        Pipeline(S.unique_name("pt"), timeout=value)


@pytest.mark.parametrize("value", [0, timedelta(0)], ids=["int", "timedelta"])
def test_pipeline_timeout_zero_is_value_error(value: Any) -> None:
    with pytest.raises(ValueError, match=r"^timeout must be greater than 0"):
        Pipeline(S.unique_name("pt"), timeout=value)


@pytest.mark.parametrize("value,seconds", [(timedelta(minutes=1), 60), (timedelta(hours=2), 7200), (90, 90),
                                           (None, None)])
def test_pipeline_timeout_stored_as_int_seconds(value: Any, seconds: int | None) -> None:
    p = Pipeline(S.unique_name("pt"), timeout=value).start(S.a)
    assert p.timeout == seconds
    assert p.definition().timeout == seconds
    if seconds is not None:
        assert type(p.definition().timeout) is int


@pytest.mark.parametrize("name", ["", "   ", None, 5, b"x"])
def test_pipeline_name_must_be_non_empty_str(name: Any) -> None:
    with pytest.raises(TypeError, match="pipeline name must be a non-empty str"):
        Pipeline(name)


class Name(str):
    """A ``str`` subclass: names are stored and compared as plain ``str``."""


BAD_NAMES = [
    pytest.param(Name("x"), TypeError, r"must be a str, got Name \('x'\)", id="str-subclass"),
    pytest.param("x" * 201, DefinitionError, "must be at most 200 characters, got 201", id="too-long"),
    pytest.param("a\nb", DefinitionError, r"must be printable text \(no control characters\), got 'a\\nb'",
                 id="newline"),
    pytest.param("a\x00b", DefinitionError, "must be printable text", id="nul"),
    # A lone surrogate is not printable either: refused before it could fail to encode.
    pytest.param("a\ud800", DefinitionError, "must be printable text", id="lone-surrogate"),
]


@pytest.mark.parametrize(("name", "error", "message"), BAD_NAMES)
def test_a_pipeline_name_must_be_printable_text_of_at_most_200_characters(name: Any, error: type,
                                                                          message: str) -> None:
    with pytest.raises(error, match=f"^pipeline name {message}"):
        Pipeline(name)


@pytest.mark.parametrize(("name", "error", "message"),
                         [*BAD_NAMES, pytest.param("   ", DefinitionError, "must not be empty", id="blank")])
def test_a_step_name_must_be_printable_text_of_at_most_200_characters(name: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=f"^step name {message}"):
        new().start(S.a, name=name)


def test_names_of_200_printable_characters_are_kept() -> None:
    name = "é" * 200
    p = Pipeline(S.unique_name("n")[:100] + "ü" * 100).start(S.a, name=name)
    assert list(p.definition().nodes) == [name]


# -- max_retry / max_crash ------------------------------------------------------------

@pytest.mark.parametrize("value", [True, False, 1.0, 2.5, "3", [3]],
                         ids=["True", "False", "1.0", "2.5", "str", "list"])
@pytest.mark.parametrize("option", ["max_retry", "max_crash"])
@pytest.mark.parametrize("transition", TRANSITIONS)
def test_count_option_of_wrong_type_is_type_error(transition: str, option: str, value: Any) -> None:
    with pytest.raises(TypeError, match=rf"^{option} must be an int"):
        build_with(transition, **{option: value})


@pytest.mark.parametrize("option", ["max_retry", "max_crash"])
@pytest.mark.parametrize("transition", TRANSITIONS)
def test_count_option_negative_is_value_error(transition: str, option: str) -> None:
    with pytest.raises(ValueError, match=rf"^{option} must not be negative, got -1"):
        build_with(transition, **{option: -1})


@pytest.mark.parametrize("value", [0, 1, 25])
@pytest.mark.parametrize("option", ["max_retry", "max_crash"])
def test_count_option_stored(option: str, value: int) -> None:
    p, _ = build_with("chain", **{option: value})
    assert getattr(p.definition().nodes["b"].options, option) == value


# -- other options --------------------------------------------------------------------

@pytest.mark.parametrize("value", ["processes", "Thread", "", 1])
def test_isolation_must_be_process_or_thread(value: Any) -> None:
    with pytest.raises(ValueError, match="isolation must be one of"):
        build_with("chain", isolation=value)


def test_isolation_thread_is_stored() -> None:
    p, _ = build_with("chain", isolation="thread")
    assert p.definition().nodes["b"].options.isolation == "thread"


def test_unknown_option_is_type_error() -> None:
    with pytest.raises(TypeError, match="timout"):
        build_with("chain", timout=5)


@pytest.mark.parametrize("transition", TRANSITIONS)
def test_unknown_step_option_suggests_the_closest_and_lists_the_valid_ones(transition: str) -> None:
    with pytest.raises(TypeError) as caught:
        build_with(transition, timout=5)
    message = str(caught.value)
    assert message.startswith(f"{transition}() got unknown option 'timout' (did you mean 'timeout'?); "
                              "the step options are name, "), message
    assert "max_retry, retry_delay" in message and "cpu_limit" in message
    assert ("max_fanout" in message) == (transition == "expand")


def test_unknown_step_option_without_a_close_one_lists_the_valid_ones() -> None:
    with pytest.raises(TypeError, match=r"got unknown option 'colour'; the step options are name, timeout, "):
        build_with("chain", colour=5)


def test_unknown_pipeline_option_is_the_same_type_error() -> None:
    name = S.unique_name("opts")
    with pytest.raises(TypeError) as caught:
        Pipeline(name, timout=5)  # type: ignore[call-arg]
    assert str(caught.value) == (f"Pipeline({name!r}) got unknown option 'timout' (did you mean 'timeout'?); "
                                 "the Pipeline options are name, timeout, on_failure, priority, queue")
    assert "__init__" not in str(caught.value)


def test_unknown_pipeline_options_are_all_named() -> None:
    with pytest.raises(TypeError, match=r"unknown options 'on_fail' \(did you mean 'on_failure'\?\), "
                                        r"'priorty' \(did you mean 'priority'\?\)"):
        Pipeline(S.unique_name("opts"), on_fail="halt", priorty=1)  # type: ignore[call-arg]


def test_unknown_pause_option_is_the_same_type_error() -> None:
    p, _ = build_with("chain")
    with pytest.raises(TypeError, match=r"pause\(\) got unknown option 'timout' \(did you mean 'timeout'\?\); "
                                        r"the pause options are before, timeout"):
        p.pause(before="b", timout=5)  # type: ignore[call-arg]


@pytest.mark.parametrize("value", [0, -1])
def test_expand_max_fanout_must_be_positive(value: Any) -> None:
    p = Pipeline(S.unique_name("fan")).start(S.a)
    with pytest.raises(ValueError, match="max_fanout must be from 1 to 10,000,000"):
        p.expand(to=S.b, max_fanout=value)


@pytest.mark.parametrize("value", [True, 1.5, "3"])
def test_expand_max_fanout_must_be_an_int(value: Any) -> None:
    p = Pipeline(S.unique_name("fan")).start(S.a)
    with pytest.raises(TypeError, match="max_fanout must be an int"):
        p.expand(to=S.b, max_fanout=value)


# ---------------------------------------------------------------------------------
# structural mistakes -> DefinitionError
# ---------------------------------------------------------------------------------

def new() -> Pipeline:
    return Pipeline(S.unique_name("def"))


def test_start_twice() -> None:
    p = new().start(S.a)
    with pytest.raises(DefinitionError, match=r"start\(\) may be called only once"):
        p.start(S.b)


def test_start_twice_even_after_other_transitions() -> None:
    p = new().start(S.a).chain(to=S.b)
    with pytest.raises(DefinitionError, match=r"start\(\) may be called only once"):
        p.start(S.c)


@pytest.mark.parametrize("verb", ["chain", "divide", "expand", "divert"])
def test_transition_before_start(verb: str) -> None:
    p = new()
    call = {
        "chain": lambda: p.chain(to=S.a),
        "divide": lambda: p.divide(to=[S.a, S.b]),
        "expand": lambda: p.expand(to=S.a),
        "divert": lambda: p.divert(to={"otherwise": S.a}),
    }[verb]
    with pytest.raises(DefinitionError, match=rf"^{verb} before start: call start\(step\) first"):
        call()


def test_combine_without_divide() -> None:
    p = new().start(S.a)
    with pytest.raises(DefinitionError, match="^combine without divide"):
        p.combine(into=S.b)


def test_combine_when_innermost_fanout_is_expand() -> None:
    p = new().start(S.a).expand(to=S.b)
    with pytest.raises(DefinitionError, match=r"^combine without divide \(the innermost open fan-out is a expand\)"):
        p.combine(into=S.c)


def test_collapse_without_expand() -> None:
    p = new().start(S.a)
    with pytest.raises(DefinitionError, match="^collapse without expand"):
        p.collapse(into=S.b)


def test_collapse_when_innermost_fanout_is_divide() -> None:
    p = new().start(S.a).expand(to=S.b).divide(to=[S.c, S.d])
    with pytest.raises(DefinitionError, match=r"^collapse without expand \(the innermost open fan-out is a divide\)"):
        p.collapse(into=S.e)


def test_converge_without_divert() -> None:
    p = new().start(S.a)
    with pytest.raises(DefinitionError, match="^converge without divert"):
        p.converge(into=S.b)


def test_converge_closing_a_divide() -> None:
    p = new().start(S.a).divide(to=[S.b, S.c])
    with pytest.raises(DefinitionError, match="^converge without divert"):
        p.converge(into=S.d)


def test_divert_without_otherwise() -> None:
    p = new().start(S.a)
    with pytest.raises(DefinitionError, match="needs an 'otherwise' route"):
        p.divert(to={"yes": S.b, "no": S.c})


@pytest.mark.parametrize("to", [{}, [S.b], None, S.b])
def test_divert_needs_a_dict(to: Any) -> None:
    p = new().start(S.a)
    with pytest.raises(DefinitionError, match="divert.*needs a dict"):
        p.divert(to=to)


def test_divert_keys_must_be_str() -> None:
    p = new().start(S.a)
    with pytest.raises(DefinitionError, match="1 is not a str"):
        p.divert(to={1: S.b, "otherwise": S.c})


@pytest.mark.parametrize("to", [[], (), None, S.b, "b"])
def test_divide_needs_a_non_empty_list(to: Any) -> None:
    p = new().start(S.a)
    with pytest.raises(DefinitionError, match=r"divide\(to=...\) needs a non-empty list"):
        p.divide(to=to)


@pytest.mark.parametrize("verb", ["start", "chain", "divide", "expand", "divert", "on_halt"])
def test_lambda_step_is_rejected(verb: str) -> None:
    p = new()
    if verb != "start":
        p.start(S.a)
    call = {
        "start": lambda: p.start(S.lambda_step),
        "chain": lambda: p.chain(to=S.lambda_step),
        "divide": lambda: p.divide(to=[S.b, S.lambda_step]),
        "expand": lambda: p.expand(to=S.lambda_step),
        "divert": lambda: p.divert(to={"otherwise": S.lambda_step}),
        "on_halt": lambda: p.on_halt(S.lambda_step),
    }[verb]
    with pytest.raises(DefinitionError, match=r"'<lambda>' is not importable by name: define it at module level"):
        call()


def test_inline_lambda_is_rejected() -> None:
    with pytest.raises(DefinitionError, match="not importable by name"):
        new().start(lambda x: x)


def test_nested_function_is_rejected() -> None:
    with pytest.raises(DefinitionError, match=r"'make_nested\.<locals>\.nested' is not importable by name"):
        new().start(S.nested_step)


def test_function_defined_in_test_body_is_rejected() -> None:
    def local(x):
        return x

    with pytest.raises(DefinitionError, match="<locals>"):
        new().start(S.a).chain(to=local)


def test_a_function_without_a_module_is_rejected() -> None:
    namespace: dict[str, Any] = {}
    exec("def orphan(x):\n    return x", namespace)  # its globals have no __name__: no module
    assert namespace["orphan"].__module__ is None
    with pytest.raises(DefinitionError, match="has no module and qualified name"):
        new().start(namespace["orphan"])


def test_step_not_bound_to_its_name_is_rejected() -> None:
    assert S.shadowed_original.__qualname__ == "shadowed"
    with pytest.raises(DefinitionError, match=r"steps_for_tests:shadowed is not importable by name \(it is not bound"):
        new().start(S.shadowed_original)


def test_rebound_function_under_its_own_name_is_accepted() -> None:
    p = new().start(S.shadowed)
    assert p.definition().nodes["shadowed"].ref == "steps_for_tests:shadowed"


@pytest.mark.parametrize("obj", [print, len, 5, "steps_for_tests:a", S.ClassStep(), None],
                         ids=["builtin-print", "builtin-len", "int", "str", "instance", "None"])
def test_non_function_step_is_rejected(obj: Any) -> None:
    with pytest.raises(DefinitionError, match="a step must be a module-level function"):
        new().start(obj)


def test_class_not_a_step_subclass_is_rejected() -> None:
    with pytest.raises(DefinitionError, match=r"is a class but not a ductline\.Step subclass"):
        new().start(S.a).chain(to=S.NotAStep)


def test_duplicate_step_name_is_rejected() -> None:
    p = new().start(S.a).chain(to=S.b)
    with pytest.raises(DefinitionError, match=r"already has a step named 'a'; give one name="):
        p.chain(to=S.a)


def test_duplicate_name_via_name_override_is_rejected() -> None:
    p = new().start(S.a).chain(to=S.b)
    with pytest.raises(DefinitionError, match="already has a step named 'b'"):
        p.chain(to=S.c, name="b")


def test_duplicate_name_inside_divide_is_rejected() -> None:
    p = new().start(S.a)
    with pytest.raises(DefinitionError, match="already has a step named 'b'"):
        p.divide(to=[S.b, S.b])


def test_name_resolves_duplicate() -> None:
    p = new().start(S.a).chain(to=S.a, name="a_again").chain(to=S.a, name="a_third")
    definition = p.definition()
    assert list(definition.nodes) == ["a", "a_again", "a_third"]
    assert {n.ref for n in definition.nodes.values()} == {"steps_for_tests:a"}


def test_reserved_on_halt_name_is_rejected() -> None:
    with pytest.raises(DefinitionError, match="already has a step named '__on_halt__'"):
        new().start(S.a, name="__on_halt__")


@pytest.mark.parametrize("name", ["", 5])
def test_step_name_must_be_non_empty_str(name: Any) -> None:
    with pytest.raises(DefinitionError, match="step name must be a non-empty str"):
        new().start(S.a, name=name)


@pytest.mark.parametrize("fanout", ["divide", "divert"])
@pytest.mark.parametrize("verb", ["chain", "divide", "expand", "divert", "collapse"])
def test_transition_after_divide_or_divert_without_branch(fanout: str, verb: str) -> None:
    p = new().start(S.a)
    if fanout == "divide":
        p.divide(to=[S.b, S.c])
        closer = "combine"
    else:
        p.divert(to={"x": S.b, "otherwise": S.c})
        closer = "converge"
    call = {
        "chain": lambda: p.chain(to=S.d),
        "divide": lambda: p.divide(to=[S.d, S.e]),
        "expand": lambda: p.expand(to=S.d),
        "divert": lambda: p.divert(to={"otherwise": S.d}),
        "collapse": lambda: p.collapse(into=S.d),
    }[verb]
    if verb == "collapse":
        expected = f"^collapse without expand \\(the innermost open fan-out is a {fanout}\\)"
    else:
        expected = (rf"^{verb} after {fanout}: extend a branch with \.branch\(name\) "
                    rf"or close it with {closer}")
    with pytest.raises(DefinitionError, match=expected):
        call()


def test_branch_of_unknown_name() -> None:
    p = new().start(S.a).divide(to=[S.b, S.c])
    with pytest.raises(DefinitionError, match="no open divide or divert has a branch 'd'"):
        p.branch("d")
    with pytest.raises(DefinitionError, match="no open divide or divert has a branch 'd'"):
        p.branch(S.d)


def test_branch_without_open_divide() -> None:
    p = new().start(S.a)
    with pytest.raises(DefinitionError, match="no open divide or divert has a branch 'a'"):
        p.branch("a")


def test_branch_of_outer_divide_is_hidden_by_inner_expand() -> None:
    p = new().start(S.a).divide(to=[S.b, S.c])
    p.branch("b").chain(to=S.d)
    # root's innermost frame is the divide: fine; but an expand opened inside a branch
    # has its own cursor, so the root cannot reach into it.
    p.branch("c").expand(to=S.e)
    with pytest.raises(DefinitionError, match="no open divide or divert has a branch 'e'"):
        p.branch("e")


def test_branch_cannot_be_extended_after_combine() -> None:
    p = new().start(S.a).divide(to=[S.b, S.c])
    branch = p.branch("b")
    p.combine(into=S.d)
    with pytest.raises(DefinitionError, match="branch 'b' was already combined; it cannot be extended"):
        branch.chain(to=S.e)


def test_combine_when_a_branch_has_an_open_expand() -> None:
    p = new().start(S.a).divide(to=[S.b, S.c])
    p.branch("c").expand(to=S.d)
    with pytest.raises(DefinitionError, match="branch 'c' has an open expand; close it before the fan-in"):
        p.combine(into=S.e)


def test_combine_when_a_branch_has_an_open_divide() -> None:
    p = new().start(S.a).divide(to=[S.b, S.c])
    p.branch("b").divide(to=[S.d, S.e])
    with pytest.raises(DefinitionError, match="branch 'b' has an open divide; close it before the fan-in"):
        p.combine(into=S.f)


def test_converge_when_a_route_has_an_open_expand() -> None:
    p = new().start(S.a).divert(to={"x": S.b, "otherwise": S.c})
    p.branch("b").expand(to=S.d)
    with pytest.raises(DefinitionError, match="branch 'b' has an open expand"):
        p.converge(into=S.e)


@pytest.mark.parametrize("opened,closer", [("divide", "combine"), ("expand", "collapse"),
                                           ("divert", "converge")])
def test_definition_with_open_fanout(opened: str, closer: str) -> None:
    p = new().start(S.a)
    {"divide": lambda: p.divide(to=[S.b, S.c]),
     "expand": lambda: p.expand(to=S.b),
     "divert": lambda: p.divert(to={"x": S.b, "otherwise": S.c})}[opened]()
    with pytest.raises(DefinitionError, match=rf"ends with an open {opened}; close it with {closer}"):
        p.definition()


def test_definition_with_inner_open_expand_after_combine_inside_expand() -> None:
    p = new().start(S.a).expand(to=S.b).divide(to=[S.c, S.d]).combine(into=S.e)
    with pytest.raises(DefinitionError, match="ends with an open expand; close it with collapse"):
        p.definition()


def test_definition_without_start() -> None:
    p = new()
    with pytest.raises(DefinitionError, match=r"has no start step"):
        p.definition()


def test_on_halt_twice() -> None:
    p = new().start(S.a).on_halt(S.halt_handler)
    with pytest.raises(DefinitionError, match=r"on_halt\(\) may be called only once"):
        p.on_halt(S.b)


def test_definition_error_is_a_ductline_error() -> None:
    import ductline

    assert issubclass(DefinitionError, ductline.DuctlineError)


# ---------------------------------------------------------------------------------
# trigger: bad arguments raise before anything is written
# ---------------------------------------------------------------------------------

@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A migrated SQLite database file; stores opened by `trigger` are closed after."""
    from ductline import stores
    from ductline.store import open_store

    path = tmp_path / "x.db"
    url = f"sqlite:///{path}"
    store = open_store(url)
    store.migrate()
    store.close()
    yield url, path
    for key in [k for k in stores._open if k[1] == url]:
        stores._open.pop(key).close()


def count_rows(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("ductline_runs", "ductline_jobs", "ductline_attempts")}
    finally:
        conn.close()


EMPTY = {"ductline_runs": 0, "ductline_jobs": 0, "ductline_attempts": 0}


def trigger_pipeline() -> Pipeline:
    return Pipeline(S.unique_name("trig")).start(S.a)


def test_trigger_control_a_valid_trigger_writes_one_run(db: tuple[str, Path]) -> None:
    """Proves the row count used below would see a write."""
    url, path = db
    handle = trigger_pipeline().trigger(1, database=url)
    assert len(handle.id) == 32
    assert count_rows(path) == {"ductline_runs": 1, "ductline_jobs": 1, "ductline_attempts": 0}


@pytest.mark.parametrize("args,fragment", [
    (({1, 2},), r"trigger arguments\[0\]: set value"),
    ((1, 2 + 3j), r"trigger arguments\[1\]: complex value"),
    (({"k": b"raw"},), r"trigger arguments\[0\]\['k'\]: bytes value"),
    ((float("nan"),), r"trigger arguments\[0\]: nan is not representable"),
    ((datetime(2030, 1, 1),), r"trigger arguments\[0\]: naive datetime"),
], ids=["set", "complex", "bytes", "nan", "naive-datetime"])
def test_trigger_with_unencodable_argument_writes_nothing(db: tuple[str, Path], args: tuple[Any, ...],
                                                          fragment: str) -> None:
    url, path = db
    with pytest.raises(TypeError, match=fragment):
        trigger_pipeline().trigger(*args, database=url)
    assert count_rows(path) == EMPTY


def test_trigger_with_delay_and_delay_until_writes_nothing(db: tuple[str, Path]) -> None:
    url, path = db
    when = datetime.now(timezone.utc) + timedelta(hours=1)
    with pytest.raises(ValueError, match="give delay or delay_until, not both"):
        trigger_pipeline().trigger(1, delay=5, delay_until=when, database=url)
    assert count_rows(path) == EMPTY


def test_trigger_with_naive_delay_until_writes_nothing(db: tuple[str, Path]) -> None:
    url, path = db
    with pytest.raises(ValueError, match="delay_until must be timezone-aware"):
        trigger_pipeline().trigger(1, delay_until=datetime.now() + timedelta(hours=1), database=url)
    assert count_rows(path) == EMPTY


def test_trigger_with_past_delay_until_writes_nothing(db: tuple[str, Path]) -> None:
    url, path = db
    with pytest.raises(ValueError, match="delay_until is in the past"):
        trigger_pipeline().trigger(1, delay_until=datetime.now(timezone.utc) - timedelta(hours=1), database=url)
    assert count_rows(path) == EMPTY


def test_trigger_with_non_datetime_delay_until_writes_nothing(db: tuple[str, Path]) -> None:
    url, path = db
    with pytest.raises(TypeError, match="delay_until must be an aware datetime, not str"):
        trigger_pipeline().trigger(1, delay_until="2030-01-01T00:00:00Z", database=url)
    assert count_rows(path) == EMPTY


@pytest.mark.parametrize("delay", [-1, timedelta(seconds=-5)], ids=["int", "timedelta"])
def test_trigger_with_negative_delay_writes_nothing(db: tuple[str, Path], delay: Any) -> None:
    url, path = db
    with pytest.raises(ValueError, match="delay must not be negative"):
        trigger_pipeline().trigger(1, delay=delay, database=url)
    assert count_rows(path) == EMPTY


@pytest.mark.parametrize("kw,exc,fragment", [
    ({"delay": 1.5}, TypeError, "delay must be an int number of seconds"),
    ({"delay": "5m"}, TypeError, "delay must be an int number of seconds"),
    ({"timeout": 0}, ValueError, "timeout must be greater than 0"),
    ({"timeout": -1}, ValueError, "timeout must not be negative"),
    ({"timeout": True}, TypeError, "timeout must be an int number of seconds"),
], ids=["delay-float", "delay-str", "timeout-0", "timeout-neg", "timeout-bool"])
def test_trigger_with_bad_duration_writes_nothing(db: tuple[str, Path], kw: dict[str, Any], exc: type,
                                                  fragment: str) -> None:
    url, path = db
    with pytest.raises(exc, match=fragment):
        trigger_pipeline().trigger(1, database=url, **kw)
    assert count_rows(path) == EMPTY


def test_trigger_of_invalid_definition_writes_nothing(db: tuple[str, Path]) -> None:
    url, path = db
    p = Pipeline(S.unique_name("trig")).start(S.a).expand(to=S.b)
    with pytest.raises(DefinitionError, match="open expand"):
        p.trigger([1], database=url)
    assert count_rows(path) == EMPTY


# ---------------------------------------------------------------------------------
# known bugs of the builder
# ---------------------------------------------------------------------------------

def test_extending_after_definition_is_not_silently_ignored() -> None:
    p = new().start(S.a)
    p.definition()
    try:
        p.chain(to=S.b)
    except DefinitionError:
        return
    assert "b" in p.definition().nodes


def test_failed_combine_does_not_leave_a_valid_looking_pipeline() -> None:
    p = new().start(S.a).divide(to=[S.b, S.c])
    p.branch("b").expand(to=S.d)
    with pytest.raises(DefinitionError, match="open expand"):
        p.combine(into=S.e)
    with pytest.raises(DefinitionError):
        p.definition()


@pytest.mark.parametrize("verb", ["divide", "divert"])
def test_divide_and_divert_accept_name(verb: str) -> None:
    p = new().start(S.a)
    if verb == "divide":
        p.divide(to=[S.b], name="only_branch")
    else:
        p.divert(to={"otherwise": S.b}, name="only_route")
