"""Which step runs a completion creates (`ductline.model.routing`), for every
transition (DESIGN.md, "The DSL"), and what each new job carries."""

from __future__ import annotations

from dataclasses import replace

import json
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import pytest

import rules_definitions as D
import steps_for_tests as S
from ductline import Backoff, codec
from ductline.dsl.graph import Definition
from ductline.dsl.timeouts import ScaledTimeout
from ductline.model.cascade import Dependent
from ductline.model.claim_order import FIRST_STEP, UNDER_WAY
from ductline.model.routing import (
    Create, Gather, JobSpec, Routing, gathered_args, initial_status, job_spec, job_specs, route, timeout_floor,
)
from ductline.model.states import JobStatus, RunStatus


def given(value: Any) -> Callable[[], Any]:
    return lambda: value


def unread() -> Any:
    raise AssertionError("this transition must not look inside the output")


# -- every transition ------------------------------------------------------------------------

# (definition, completed step, its scope, output as stored, decoded output, expected routing)
ROUTES = [
    # chain, divide, converge: each target receives [output], in the same scope.
    pytest.param(D.linear, "a", "", "5", unread, Routing((Create("b", "", "[5]"),)), id="chain"),
    pytest.param(D.linear, "c", "", '{"k":[1,2]}', unread, Routing((Create("d", "", '[{"k":[1,2]}]'),)),
                 id="chain-object"),
    pytest.param(D.expand_collapse, "b", "4", '"x"', unread, Routing((Create("c", "4", '["x"]'),)),
                 id="chain-inside-expand-keeps-scope"),
    pytest.param(D.divide_combine, "a", "", "1", unread,
                 Routing((Create("b", "", "[1]"), Create("c", "", "[1]"))), id="divide-in-to-order"),
    pytest.param(D.divide_in_expand, "b", "2", "null", unread,
                 Routing((Create("c", "2", "[null]"), Create("d", "2", "[null]"))), id="divide-inside-expand"),
    pytest.param(D.divide_combine, "b", "", "1", unread, Routing((Create("e", "", "[1]"),)),
                 id="extended-branch-chains"),
    pytest.param(D.divert_converge, "b", "", '"x"', unread, Routing((Create("f", "", '["x"]'),)), id="converge"),
    pytest.param(D.divert_converge, "d", "", "7", unread, Routing((Create("f", "", "[7]"),)),
                 id="converge-from-otherwise"),

    # combine: counted, in to= order of the branch tails.
    pytest.param(D.divide_combine, "e", "", "1", unread, Routing(gather=Gather("d", "", 2, ("e", "c"))),
                 id="combine-first-branch"),
    pytest.param(D.divide_combine, "c", "", "1", unread, Routing(gather=Gather("d", "", 2, ("e", "c"))),
                 id="combine-second-branch"),
    pytest.param(D.divide_in_expand, "d", "2", "1", unread, Routing(gather=Gather("e", "2", 2, ("c", "d"))),
                 id="combine-inside-expand"),

    # collapse: counted in the parent scope; the expand opened the count.
    pytest.param(D.expand_collapse, "c", "0", "1", unread, Routing(gather=Gather("d", "", None, ("c",))),
                 id="collapse"),
    pytest.param(D.expand_collapse, "c", "17", "1", unread, Routing(gather=Gather("d", "", None, ("c",))),
                 id="collapse-element-17"),
    pytest.param(D.nested_expand, "c", "1/2", "1", unread, Routing(gather=Gather("d", "1", None, ("c",))),
                 id="inner-collapse"),
    pytest.param(D.nested_expand, "d", "1", "[1]", unread, Routing(gather=Gather("e", "", None, ("d",))),
                 id="outer-collapse"),
    pytest.param(D.divide_in_expand, "e", "3", "[1,2]", unread, Routing(gather=Gather("f", "", None, ("e",))),
                 id="collapse-after-combine"),

    # expand: one step run per element, in child scopes, and the collapse's count opened.
    pytest.param(D.expand_collapse, "a", "", '[10,"x",{"k":1}]', given([10, "x", {"k": 1}]),
                 Routing((Create("b", "0", "[10]", spill=True), Create("b", "1", '["x"]', spill=True),
                          Create("b", "2", '[{"k":1}]', spill=True)), opens=("d", "", 3)),
                 id="expand-three"),
    pytest.param(D.expand_collapse, "a", "", "[null]", given([None]),
                 Routing((Create("b", "0", "[null]", spill=True),), opens=("d", "", 1)), id="expand-one"),
    pytest.param(D.nested_expand, "b", "4", "[5,6]", given([5, 6]),
                 Routing((Create("c", "4/0", "[5]", spill=True), Create("c", "4/1", "[6]", spill=True)),
                         opens=("d", "4", 2)), id="nested-expand"),
    pytest.param(D.nested_expand, "b", "7", "[[]]", given([[]]),
                 Routing((Create("c", "7/0", "[[]]", spill=True),), opens=("d", "7", 1)),
                 id="expand-one-empty-list-element"),
    # Zero elements: the collapse at once with [[]] (it fires exactly once), no count.
    pytest.param(D.expand_collapse, "a", "", "[]", given([]), Routing((Create("d", "", "[[]]"),)),
                 id="expand-empty"),
    pytest.param(D.nested_expand, "b", "2", "[]", given([]), Routing((Create("d", "2", "[[]]"),)),
                 id="nested-expand-empty"),

    # the end of the run, and the handler
    pytest.param(D.linear, "d", "", "42", unread, Routing(completes_run=True), id="last-step-completes-run"),
    pytest.param(D.nested_expand, "f", "", "null", unread, Routing(completes_run=True),
                 id="last-step-after-collapses"),
    pytest.param(D.with_on_halt, "__on_halt__", "", "null", unread, Routing(), id="on_halt-creates-nothing"),
]


@pytest.mark.parametrize(("build", "step", "scope", "output", "value", "expected"), ROUTES)
def test_route(build: Callable[[], Definition], step: str, scope: str, output: str, value: Callable[[], Any],
               expected: Routing) -> None:
    assert route(build(), step, scope, output, value) == expected


# divert: the route whose key equals str(output), else "otherwise".
@pytest.mark.parametrize(("value", "target"), [
    pytest.param("x", "b", id="str-key"),
    pytest.param(1, "c", id="int-as-str"),
    pytest.param("1", "c", id="str-1"),
    pytest.param(True, "e", id="bool-as-str-True"),
    pytest.param("True", "e", id="str-True"),
    pytest.param(1.0, "d", id="float-1.0-is-not-1"),
    pytest.param(None, "d", id="none-otherwise"),
    pytest.param("X", "d", id="case-sensitive"),
    pytest.param(" x", "d", id="no-stripping"),
    pytest.param("otherwise", "d", id="literal-otherwise"),
    pytest.param({"x": 1}, "d", id="dict-otherwise"),
    pytest.param(["x"], "d", id="list-otherwise"),
])
def test_route_divert(value: Any, target: str) -> None:
    output = json.dumps(value, separators=(",", ":"))
    routing = route(D.divert_converge(), "a", "", output, given(value))
    assert routing.creates == (Create(target, "", f"[{output}]"),)
    others = [step for step in ("b", "c", "e", "d") if step != target]  # in to= order
    assert routing.skips == tuple(Dependent(step, "", "a") for step in others)


def test_route_divert_inside_an_expand_keeps_the_scope() -> None:
    definition = D.new().start(S.a).expand(to=S.b).divert(to={"x": S.c, "otherwise": S.d}).converge(
        into=S.e).collapse(into=S.f).definition()
    assert route(definition, "b", "3", '"x"', given("x")) == Routing((Create("c", "3", '["x"]'),),
                                                                     skips=(Dependent("d", "3", "b"),))


def test_route_divert_decides_on_the_full_value_of_a_reference() -> None:
    ref = '{"$ref":"payload-1"}'
    assert route(D.divert_converge(), "a", "", ref, given("x"), full_output='"x"').creates == (
        Create("b", "", f"[{ref}]", '["x"]'),)


def test_a_divert_skips_the_routes_not_taken_up_to_where_they_meet() -> None:
    """A route extended by a chain is skipped whole; the converge and what follows
    it are reached by the taken route, so they are not skipped."""
    pipeline = D.new().start(S.a).divert(to={"x": S.b, "otherwise": S.c})
    pipeline.branch(S.c).chain(to=S.d)
    definition = pipeline.converge(into=S.e).chain(to=S.f).definition()
    assert route(definition, "a", "", '"x"', given("x")).skips == (Dependent("c", "", "a"), Dependent("d", "", "a"))
    assert route(definition, "a", "", '"y"', given("y")).skips == (Dependent("b", "", "a"),)


def test_route_expand_passes_elements_on_as_the_codec_wrote_them() -> None:
    """The parent splits the structure (`codec.structure`): a tagged element keeps
    its tag and comes back as its type where it is decoded."""
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    routing = route(D.expand_collapse(), "a", "", "ignored", given(codec.structure(codec.dumps([moment]))))
    (create,) = routing.creates
    assert create.args == f"[{codec.dumps(moment)}]"
    assert codec.loads(create.args) == [moment]


# -- full_output: a reference passed on, the full text kept for limit keys ------------------

REF = '{"$ref":"p1"}'
FULL = '{"customer":"acme"}'


@pytest.mark.parametrize(("build", "step", "scope", "expected"), [
    pytest.param(D.linear, "a", "", Routing((Create("b", "", f"[{REF}]", f"[{FULL}]"),)), id="chain"),
    pytest.param(D.divide_combine, "a", "",
                 Routing((Create("b", "", f"[{REF}]", f"[{FULL}]"), Create("c", "", f"[{REF}]", f"[{FULL}]"))),
                 id="divide"),
    pytest.param(D.divert_converge, "d", "", Routing((Create("f", "", f"[{REF}]", f"[{FULL}]"),)), id="converge"),
    pytest.param(D.divide_combine, "c", "", Routing(gather=Gather("d", "", 2, ("e", "c"))), id="combine-gathers"),
    pytest.param(D.linear, "d", "", Routing(completes_run=True), id="last-step"),
])
def test_route_passes_a_reference_on_with_its_full_text(build: Callable[[], Definition], step: str, scope: str,
                                                        expected: Routing) -> None:
    assert route(build(), step, scope, REF, unread, full_output=FULL) == expected


def test_route_without_full_output_has_no_full_args() -> None:
    (create,) = route(D.linear(), "a", "", FULL, unread).creates
    assert (create.args, create.full_args, create.spill) == (f"[{FULL}]", None, False)


@pytest.mark.parametrize(("routing", "elements"), [
    pytest.param(Gather("d", "", None, ("c",)), True, id="collapse"),
    pytest.param(Gather("d", "", 2, ("e", "c")), False, id="combine"),
])
def test_gather_elements(routing: Gather, elements: bool) -> None:
    assert routing.elements is elements


@pytest.mark.parametrize(("outputs", "expected"), [
    pytest.param([], "[[]]", id="none"),
    pytest.param(["1"], "[[1]]", id="one"),
    pytest.param(['"a"', '{"k":1}', "null", "[1,2]"], '[["a",{"k":1},null,[1,2]]]', id="several-in-order"),
    pytest.param([REF, "2"], f"[[{REF},2]]", id="reference-kept"),
])
def test_gathered_args(outputs: list[str], expected: str) -> None:
    assert gathered_args(outputs) == expected
    assert json.loads(gathered_args(outputs)) == [[json.loads(o) for o in outputs]]


# -- what a new job carries --------------------------------------------------------------------

def spec(**changes: Any) -> JobSpec:
    """The spec of a top-level step with default options (default retry delay 10 s)."""
    base: dict[str, Any] = dict(parent_scope=None, elem_index=None, delay_ms=0, max_retry=3, max_crash=10,
                                retry_delay_seconds=10, timeout_seconds=None, priority=0, limit_key=None,
                                paused=False, pause_timeout_seconds=None)
    base.update(changes)
    return JobSpec(**base)


def chained(**options: Any) -> Definition:
    """a -> b, with ``options`` on b."""
    return D.new().start(S.a).chain(to=S.b, **options).definition()


@pytest.mark.parametrize(("options", "default_delay", "expected"), [
    pytest.param({}, 10, spec(), id="defaults"),
    pytest.param({}, 25, spec(retry_delay_seconds=25), id="configured-default-retry-delay"),
    pytest.param({"retry_delay": 7}, 25, spec(retry_delay_seconds=7), id="step-retry-delay-wins"),
    pytest.param({"retry_delay": 0}, 25, spec(retry_delay_seconds=0), id="step-retry-delay-zero-wins"),
    pytest.param({"retry_delay": timedelta(minutes=1)}, 10, spec(retry_delay_seconds=60), id="retry-delay-timedelta"),
    pytest.param({"retry_delay": Backoff.exponential(3, cap=60)}, 25, spec(retry_delay_seconds=3),
                 id="backoff-base-stored"),
    pytest.param({"delay": 5}, 10, spec(delay_ms=5_000), id="delay"),
    pytest.param({"delay": timedelta(hours=1)}, 10, spec(delay_ms=3_600_000), id="delay-timedelta"),
    pytest.param({"max_retry": 0, "max_crash": 2}, 10, spec(max_retry=0, max_crash=2), id="budgets"),
    pytest.param({"timeout": 30}, 10, spec(timeout_seconds=30), id="timeout"),
    pytest.param({"timeout": timedelta(minutes=2)}, 10, spec(timeout_seconds=120), id="timeout-timedelta"),
    pytest.param({"timeout": ScaledTimeout(floor=60, cap=600, size=D.input_size)}, 10, spec(timeout_seconds=60),
                 id="scaled-timeout-floor"),
    pytest.param({"priority": -7}, 10, spec(priority=-7), id="priority"),
])
def test_job_spec_options(options: dict[str, Any], default_delay: int, expected: JobSpec) -> None:
    definition = chained(**options)
    # a job follows the definition its run started with (its fingerprint)
    assert job_spec(definition, "b", "", "[1]", default_delay) == replace(expected, definition=definition.fingerprint)


@pytest.mark.parametrize(("options", "input_json", "key_suffix"), [
    pytest.param({"concurrency": 2}, '[{"customer":"acme"}]', "", id="concurrency"),
    pytest.param({"rate": 5}, "[1]", "", id="rate"),
    pytest.param({"concurrency": 1, "concurrency_key": "customer"}, '[{"customer":"acme"}]', ':"acme"',
                 id="keyed"),
    pytest.param({"rate": 1, "concurrency_key": "customer"}, "[3]", ":null", id="keyed-not-a-dict"),
])
def test_job_spec_limit_key(options: dict[str, Any], input_json: str, key_suffix: str) -> None:
    definition = chained(**options)
    assert job_spec(definition, "b", "", input_json, 10).limit_key == f"{definition.name}:b{key_suffix}"


def test_job_spec_of_an_unlimited_step_has_no_limit_key() -> None:
    assert job_spec(chained(), "b", "", '[{"customer":"acme"}]', 10).limit_key is None


@pytest.mark.parametrize(("build", "step", "scope", "parent_scope", "elem_index"), [
    pytest.param(D.expand_collapse, "a", "", None, None, id="top-level"),
    pytest.param(D.expand_collapse, "b", "0", "", 0, id="element-0"),
    pytest.param(D.expand_collapse, "c", "12", "", 12, id="element-12-chained"),
    pytest.param(D.expand_collapse, "d", "", None, None, id="collapse-at-top"),
    pytest.param(D.nested_expand, "b", "3", "", 3, id="outer-element"),
    pytest.param(D.nested_expand, "c", "3/5", "3", 5, id="inner-element"),
    pytest.param(D.nested_expand, "d", "3", "", 3, id="inner-collapse-in-outer-element"),
    pytest.param(D.nested_expand, "e", "", None, None, id="outer-collapse"),
    pytest.param(D.divide_in_expand, "e", "2", "", 2, id="combine-inside-expand"),
])
def test_job_spec_scope(build: Callable[[], Definition], step: str, scope: str, parent_scope: str | None,
                        elem_index: int | None) -> None:
    got = job_spec(build(), step, scope, "[1]", 10)
    assert (got.parent_scope, got.elem_index) == (parent_scope, elem_index)


@pytest.mark.parametrize(("timeout", "expected"), [
    pytest.param(None, spec(paused=True), id="no-timeout"),
    pytest.param(60, spec(paused=True, pause_timeout_seconds=60), id="timeout"),
    pytest.param(timedelta(days=1), spec(paused=True, pause_timeout_seconds=86_400), id="timeout-timedelta"),
])
def test_job_spec_paused(timeout: Any, expected: JobSpec) -> None:
    definition = D.new().start(S.a).chain(to=S.b).chain(to=S.c).pause(before="b", timeout=timeout).definition()
    followed = {"definition": definition.fingerprint}
    assert job_spec(definition, "b", "", "[1]", 10) == replace(expected, **followed)
    assert job_spec(definition, "c", "", "[1]", 10) == spec(**followed)


def test_job_spec_of_the_on_halt_handler() -> None:
    definition = D.with_on_halt()
    assert job_spec(definition, "__on_halt__", "", "[[]]", 10) == spec(max_retry=1, max_crash=0,
                                                                       definition=definition.fingerprint)


@pytest.mark.parametrize(("build", "step", "scope", "phase"), [
    pytest.param(lambda: chained(), "a", "", FIRST_STEP, id="first-step"),
    pytest.param(lambda: chained(), "b", "", UNDER_WAY, id="chained"),
    pytest.param(D.expand_collapse, "a", "", FIRST_STEP, id="first-step-of-an-expand"),
    pytest.param(D.expand_collapse, "b", "0", UNDER_WAY, id="element"),
    pytest.param(D.expand_collapse, "d", "", UNDER_WAY, id="collapse"),
    pytest.param(D.with_on_halt, "__on_halt__", "", UNDER_WAY, id="on-halt-handler"),
])
def test_job_spec_phase_puts_first_steps_after_runs_under_way(build: Callable[[], Definition], step: str,
                                                              scope: str, phase: int) -> None:
    assert job_spec(build(), step, scope, "[1]", 10).phase == phase


def _keyed_elements() -> Definition:
    """a expands to b (keyed concurrency limit, paused before), which collapses into c."""
    return (D.new().start(S.a).expand(to=S.b, concurrency=1, concurrency_key="customer", priority=3, max_retry=1)
            .collapse(into=S.c).pause(before="b", timeout=60).definition())


@pytest.mark.parametrize(("build", "step_runs"), [
    pytest.param(D.expand_collapse, [("b", str(i), f"[{i}]") for i in range(5)], id="elements"),
    pytest.param(_keyed_elements, [("b", str(i), json.dumps([{"customer": f"c{i % 3}"}])) for i in range(7)]
                 + [("b", "7", "[3]")], id="elements-keyed-limit-paused"),
    pytest.param(D.nested_expand, [("c", f"{o}/{i}", "[1]") for o in range(3) for i in range(3)]
                 + [("d", "1", "[[1]]"), ("e", "", "[[2]]")], id="nested-scopes"),
    pytest.param(D.divide_in_expand, [("c", "2", "[1]"), ("d", "2", "[1]"), ("c", "3", "[1]"), ("e", "2", "[[1,1]]")],
                 id="several-steps"),
    pytest.param(D.expand_collapse, [("a", "", "[1]"), ("d", "", "[[]]"), ("a", "", "[2]")], id="top-level"),
])
def test_job_specs_are_job_spec_for_each_step_run(build: Callable[[], Definition],
                                                  step_runs: list[tuple[str, str, str]]) -> None:
    definition = build()
    assert job_specs(definition, step_runs, 10) == [job_spec(definition, step, scope, input_json, 10)
                                                    for step, scope, input_json in step_runs]


@pytest.mark.parametrize(("timeout", "expected"), [
    pytest.param(None, None, id="none"),
    pytest.param(30, 30, id="seconds"),
    pytest.param(ScaledTimeout(floor=timedelta(minutes=30), cap=timedelta(hours=4), size=D.input_size), 1_800,
                 id="scaled-floor"),
])
def test_timeout_floor(timeout: Any, expected: int | None) -> None:
    assert timeout_floor(timeout) == expected


@pytest.mark.parametrize(("paused", "run", "expected"), [
    pytest.param(True, RunStatus.RUNNING, JobStatus.PAUSED, id="paused-running-run"),
    pytest.param(True, RunStatus.HALTED, JobStatus.PAUSED, id="paused-halted-run"),
    pytest.param(False, RunStatus.PENDING, JobStatus.PENDING, id="pending-run"),
    pytest.param(False, RunStatus.RUNNING, JobStatus.PENDING, id="running-run"),
    pytest.param(False, RunStatus.PAUSED, JobStatus.PENDING, id="paused-run"),
    pytest.param(False, RunStatus.HALTED, JobStatus.HELD, id="halted-run-holds"),
])
def test_initial_status(paused: bool, run: RunStatus, expected: JobStatus) -> None:
    assert initial_status(spec(paused=paused), run) is expected
