"""The shape of the graph the DSL builds: nodes, depths, transitions."""

from __future__ import annotations

from datetime import timedelta

import pytest

import steps_for_tests as S
from ductline import Pipeline, Step
from ductline.dsl.graph import Definition, TransitionKind
from ductline.dsl.options import DEFAULT_MAX_FANOUT, StepOptions
from ductline.dsl.pipeline import registered
from ductline.errors import PipelineNotFound


def new(timeout: object = None) -> Pipeline:
    return Pipeline(S.unique_name("graph"), timeout=timeout)


def depths(definition: Definition) -> dict[str, int]:
    return {name: node.depth for name, node in definition.nodes.items()}


# -- names, refs, kinds --------------------------------------------------------------

def test_name_defaults_to_dunder_name_and_ref_is_module_qualname() -> None:
    d = new().start(S.a).chain(to=S.b).definition()
    assert list(d.nodes) == ["a", "b"]
    assert d.start == "a"
    node = d.nodes["a"]
    assert node.name == "a"
    assert node.ref == "steps_for_tests:a"
    assert node.kind == "function"
    assert node.func is S.a


def test_name_override() -> None:
    d = new().start(S.a, name="first").chain(to=S.b, name="second").definition()
    assert list(d.nodes) == ["first", "second"]
    assert d.start == "first"
    assert d.nodes["second"].ref == "steps_for_tests:b"
    assert d.nodes["first"].next is not None and d.nodes["first"].next.targets == ("second",)


@pytest.mark.parametrize("verb", ["combine", "collapse", "converge", "expand"])
def test_name_override_on_fan_transitions(verb: str) -> None:
    p = new().start(S.a)
    if verb == "combine":
        p.divide(to=[S.b, S.c]).combine(into=S.d, name="renamed")
    elif verb == "collapse":
        p.expand(to=S.b).collapse(into=S.d, name="renamed")
    elif verb == "converge":
        p.divert(to={"x": S.b, "otherwise": S.c}).converge(into=S.d, name="renamed")
    else:
        p.expand(to=S.d, name="renamed").collapse(into=S.e)
    d = p.definition()
    assert "renamed" in d.nodes and "d" not in d.nodes
    assert d.nodes["renamed"].ref == "steps_for_tests:d"


def test_step_subclass_step() -> None:
    d = new().start(S.a).chain(to=S.ClassStep).definition()
    node = d.nodes["ClassStep"]
    assert node.kind == "class"
    assert node.ref == "steps_for_tests:ClassStep"
    assert node.func is S.ClassStep
    assert issubclass(S.ClassStep, Step)


def test_async_step_kind() -> None:
    d = new().start(S.async_step).definition()
    assert d.nodes["async_step"].kind == "async"
    assert d.nodes["async_step"].ref == "steps_for_tests:async_step"


def test_step_class_instance_carries_its_input() -> None:
    one = S.ClassStep(5)
    assert one.args == (5,) and one.input == 5 and one.execute() == 5
    many = S.ClassStep(1, 2)
    assert many.args == (1, 2) and many.input is None


def test_options_stored_on_nodes() -> None:
    d = (new().start(S.a, timeout=60, delay=timedelta(seconds=5), max_retry=0, retry_delay=7, max_crash=2,
                     isolation="thread")
         .chain(to=S.b)
         .definition())
    assert d.nodes["a"].options == StepOptions(timeout=60, delay=5, max_retry=0, retry_delay=7, max_crash=2,
                                               isolation="thread")
    assert d.nodes["b"].options == StepOptions()


def test_divide_options_apply_to_every_branch_head_only() -> None:
    d = new().start(S.a).divide(to=[S.b, S.c], delay=3).combine(into=S.d).definition()
    assert d.nodes["b"].options.delay == 3
    assert d.nodes["c"].options.delay == 3
    assert d.nodes["a"].options.delay == 0
    assert d.nodes["d"].options.delay == 0


def test_divert_options_apply_to_every_route_head() -> None:
    d = new().start(S.a).divert(to={"x": S.b, "otherwise": S.c}, timeout=9).converge(into=S.d).definition()
    assert d.nodes["b"].options.timeout == 9
    assert d.nodes["c"].options.timeout == 9
    assert d.nodes["d"].options.timeout is None


# -- depths --------------------------------------------------------------------------

def test_depth_inside_expand() -> None:
    d = new().start(S.a).expand(to=S.b).chain(to=S.c).collapse(into=S.d).chain(to=S.e).definition()
    assert depths(d) == {"a": 0, "b": 1, "c": 1, "d": 0, "e": 0}


def test_depth_of_nested_expand() -> None:
    d = (new().start(S.a)
         .expand(to=S.b)
         .expand(to=S.c)
         .collapse(into=S.d)
         .collapse(into=S.e)
         .definition())
    assert depths(d) == {"a": 0, "b": 1, "c": 2, "d": 1, "e": 0}
    assert d.nodes["a"].next.collapse == "e"
    assert d.nodes["b"].next.collapse == "d"
    assert d.nodes["c"].next.kind is TransitionKind.COLLAPSE
    assert d.nodes["d"].next.kind is TransitionKind.COLLAPSE
    assert d.last == "e"


def test_depth_of_divide_inside_expand() -> None:
    d = (new().start(S.a)
         .expand(to=S.b)
         .divide(to=[S.c, S.d])
         .combine(into=S.e)
         .collapse(into=S.f)
         .definition())
    assert depths(d) == {"a": 0, "b": 1, "c": 1, "d": 1, "e": 1, "f": 0}


def test_depth_of_expand_inside_a_branch() -> None:
    p = new().start(S.a).divide(to=[S.b, S.c])
    p.branch("b").expand(to=S.d).chain(to=S.e).collapse(into=S.f)
    d = p.combine(into=S.g).definition()
    assert depths(d) == {"a": 0, "b": 0, "c": 0, "d": 1, "e": 1, "f": 0, "g": 0}
    assert d.nodes["b"].next.kind is TransitionKind.EXPAND
    assert d.nodes["b"].next.collapse == "f"
    assert d.nodes["f"].next.kind is TransitionKind.COMBINE
    assert d.nodes["f"].next.sources == ("f", "c")
    assert d.last == "g"


def test_depth_of_divert_inside_expand() -> None:
    d = (new().start(S.a)
         .expand(to=S.b)
         .divert(to={"x": S.c, "otherwise": S.d})
         .converge(into=S.e)
         .collapse(into=S.f)
         .definition())
    assert depths(d) == {"a": 0, "b": 1, "c": 1, "d": 1, "e": 1, "f": 0}


# -- divide / combine ----------------------------------------------------------------

def test_divide_transition_targets_in_to_order() -> None:
    d = new().start(S.a).divide(to=[S.c, S.b, S.d]).combine(into=S.e).definition()
    t = d.nodes["a"].next
    assert t.kind is TransitionKind.DIVIDE
    assert t.targets == ("c", "b", "d")


def test_branches_extended_by_step_and_by_name() -> None:
    p = new().start(S.a).divide(to=[S.b, S.c])
    p.branch(S.b).chain(to=S.d)           # by step
    p.branch("c").chain(to=S.e).chain(to=S.f)   # by name
    d = p.combine(into=S.g).definition()
    assert d.nodes["b"].next.kind is TransitionKind.CHAIN and d.nodes["b"].next.targets == ("d",)
    assert d.nodes["c"].next.targets == ("e",)
    assert d.nodes["e"].next.targets == ("f",)
    for tail, index in (("d", 0), ("f", 1)):
        t = d.nodes[tail].next
        assert t.kind is TransitionKind.COMBINE
        assert t.targets == ("g",)
        assert t.branch_index == index
        assert t.sources == ("d", "f")


def test_branch_cursor_methods_return_the_same_cursor() -> None:
    p = new().start(S.a).divide(to=[S.b, S.c])
    branch = p.branch("b")
    assert branch.chain(to=S.d) is branch
    assert p.branch("b") is branch
    assert p.combine(into=S.e) is p


def test_combine_sources_follow_to_order_not_extension_order() -> None:
    p = new().start(S.a).divide(to=[S.b, S.c, S.d])
    p.branch("d").chain(to=S.e)  # the last branch is extended first
    p.branch("b").chain(to=S.f)
    d = p.combine(into=S.g).definition()
    expected = ("f", "c", "e")
    for index, tail in enumerate(expected):
        t = d.nodes[tail].next
        assert (t.kind, t.targets, t.branch_index, t.sources) == (TransitionKind.COMBINE, ("g",), index, expected)


def test_branch_with_nested_divide_combined_inside() -> None:
    p = new().start(S.a).divide(to=[S.b, S.c])
    p.branch("b").divide(to=[S.d, S.e]).combine(into=S.f)
    d = p.combine(into=S.g).definition()
    assert d.nodes["d"].next.sources == ("d", "e")
    assert d.nodes["d"].next.targets == ("f",)
    assert d.nodes["f"].next.sources == ("f", "c")
    assert d.nodes["f"].next.branch_index == 0
    assert d.nodes["c"].next.branch_index == 1
    assert d.last == "g"


# -- expand / collapse ---------------------------------------------------------------

def test_expand_transition_knows_collapse_and_max_fanout() -> None:
    d = new().start(S.a).expand(to=S.b, max_fanout=50).chain(to=S.c).collapse(into=S.d).definition()
    t = d.nodes["a"].next
    assert t.kind is TransitionKind.EXPAND
    assert t.targets == ("b",)
    assert t.collapse == "d"
    assert t.max_fanout == 50
    assert d.nodes["c"].next.kind is TransitionKind.COLLAPSE
    assert d.nodes["c"].next.targets == ("d",)


def test_expand_default_max_fanout() -> None:
    d = new().start(S.a).expand(to=S.b).collapse(into=S.c).definition()
    assert d.nodes["a"].next.max_fanout == DEFAULT_MAX_FANOUT == 100_000


# -- divert / converge ---------------------------------------------------------------

def test_divert_routes_include_otherwise() -> None:
    d = (new().start(S.a)
         .divert(to={"yes": S.b, "no": S.c, "otherwise": S.d})
         .converge(into=S.e)
         .definition())
    t = d.nodes["a"].next
    assert t.kind is TransitionKind.DIVERT
    assert t.routes == ("yes", "no", "otherwise")
    assert t.targets == ("b", "c", "d")
    for head in ("b", "c", "d"):
        assert d.nodes[head].next.kind is TransitionKind.CONVERGE
        assert d.nodes[head].next.targets == ("e",)


def test_divert_route_extended_via_branch() -> None:
    p = new().start(S.a).divert(to={"x": S.b, "otherwise": S.c})
    p.branch("c").chain(to=S.d)
    d = p.converge(into=S.e).definition()
    assert d.nodes["c"].next.targets == ("d",)
    assert d.nodes["d"].next.kind is TransitionKind.CONVERGE
    assert d.nodes["b"].next.kind is TransitionKind.CONVERGE


# -- definition ----------------------------------------------------------------------

def test_last_is_the_final_top_level_step() -> None:
    d = new().start(S.a).chain(to=S.b).definition()
    assert d.last == "b"
    assert d.nodes["b"].next is None


def test_last_of_single_step_pipeline() -> None:
    d = new().start(S.a).definition()
    assert d.last == "a"
    assert d.nodes["a"].next is None


def test_last_after_fan_in() -> None:
    d = new().start(S.a).divide(to=[S.b, S.c]).combine(into=S.d).definition()
    assert d.last == "d"


def test_definition_is_built_once_and_immutable() -> None:
    p = new().start(S.a)
    d = p.definition()
    assert p.definition() is d
    with pytest.raises(AttributeError):
        d.name = "other"  # type: ignore[misc]


def test_on_halt_node() -> None:
    p = new().start(S.a).on_halt(S.halt_handler)
    d = p.definition()
    assert d.on_halt is not None
    assert d.on_halt.name == "__on_halt__"
    assert d.on_halt.ref == "steps_for_tests:halt_handler"
    assert d.on_halt.options.max_retry == 1 and d.on_halt.options.max_crash == 0
    assert "__on_halt__" not in d.nodes
    assert d.node("__on_halt__") is d.on_halt
    assert d.node("a") is d.nodes["a"]


def test_pipeline_registers_by_name() -> None:
    p = new()
    assert registered(p.name) is p
    with pytest.raises(PipelineNotFound, match="no pipeline named"):
        registered(p.name + "_missing")


def test_design_example_builds() -> None:
    enrich = (
        Pipeline(S.unique_name("enrich_users"), timeout=timedelta(hours=2))
        .start(S.query_users, timeout=60)
        .expand(to=S.load_user, delay=timedelta(seconds=5))
        .divide(to=[S.source_a, S.source_b])
        .combine(into=S.collate, timeout=timedelta(minutes=1))
        .chain(to=S.update_user)
        .collapse(into=S.report)
    )
    d = enrich.definition()
    assert d.timeout == 7200
    assert d.start == "query_users"
    assert list(d.nodes) == ["query_users", "load_user", "source_a", "source_b", "collate", "update_user",
                             "report"]
    assert depths(d) == {"query_users": 0, "load_user": 1, "source_a": 1, "source_b": 1, "collate": 1,
                         "update_user": 1, "report": 0}
    assert d.nodes["query_users"].options.timeout == 60
    assert d.nodes["load_user"].options.delay == 5
    assert d.nodes["collate"].options.timeout == 60
    assert d.nodes["query_users"].next.kind is TransitionKind.EXPAND
    assert d.nodes["query_users"].next.collapse == "report"
    assert d.nodes["load_user"].next.kind is TransitionKind.DIVIDE
    assert d.nodes["load_user"].next.targets == ("source_a", "source_b")
    assert d.nodes["source_b"].next.sources == ("source_a", "source_b")
    assert d.nodes["source_b"].next.branch_index == 1
    assert d.nodes["update_user"].next.kind is TransitionKind.COLLAPSE
    assert d.last == "report"
