"""The breadth-first walk that skips what can no longer run (`ductline.model.cascade`):
every dependent once, in order, with the root it was reached from (DESIGN.md,
"Whole-run timeout": "all their transitive dependents ... are skipped (a BFS over
the graph)")."""

from __future__ import annotations

from typing import Callable

import pytest

import rules_definitions as D
from ductline.dsl.graph import Definition
from ductline.model.cascade import Dependent, dependents, successors


def dep(step: str, scope: str, root: str) -> Dependent:
    return Dependent(step, scope, root)


WALKS = [
    # a -> b -> c -> d
    pytest.param(D.linear, [("a", "")], [dep("b", "", "a"), dep("c", "", "a"), dep("d", "", "a")],
                 id="linear-from-start"),
    pytest.param(D.linear, [("c", "")], [dep("d", "", "c")], id="linear-from-middle"),
    pytest.param(D.linear, [("d", "")], [], id="linear-from-last"),
    pytest.param(D.linear, [], [], id="no-roots"),
    pytest.param(D.linear, [("a", ""), ("c", "")], [dep("b", "", "a"), dep("d", "", "c")],
                 id="linear-roots-excluded-each-keeps-its-own"),
    pytest.param(D.linear, [("c", ""), ("a", "")], [dep("b", "", "a"), dep("d", "", "c")],
                 id="linear-roots-walked-in-declaration-order-whatever-given"),
    pytest.param(D.linear, [("a", ""), ("a", "")], [dep("b", "", "a"), dep("c", "", "a"), dep("d", "", "a")],
                 id="duplicate-root"),

    # a divides to [b -> e, c]; [e, c] combine into d; d -> f
    pytest.param(D.divide_combine, [("a", "")],
                 [dep("b", "", "a"), dep("c", "", "a"), dep("e", "", "a"), dep("d", "", "a"), dep("f", "", "a")],
                 id="divide-bfs-order-combine-once"),
    pytest.param(D.divide_combine, [("b", "")], [dep("e", "", "b"), dep("d", "", "b"), dep("f", "", "b")],
                 id="divide-one-branch-not-its-sibling"),
    pytest.param(D.divide_combine, [("c", "")], [dep("d", "", "c"), dep("f", "", "c")], id="divide-short-branch"),
    pytest.param(D.divide_combine, [("e", ""), ("c", "")], [dep("d", "", "c"), dep("f", "", "c")],
                 id="combine-first-declared-root-wins"),
    pytest.param(D.divide_combine, [("c", ""), ("e", "")], [dep("d", "", "c"), dep("f", "", "c")],
                 id="combine-first-root-wins-other-order"),
    pytest.param(D.divide_combine, [("b", ""), ("c", "")],
                 [dep("e", "", "b"), dep("d", "", "c"), dep("f", "", "c")],
                 id="combine-reached-first-from-the-shorter-branch"),

    # a diverts to b, c, e or d; they converge into f
    pytest.param(D.divert_converge, [("a", "")],
                 [dep("b", "", "a"), dep("c", "", "a"), dep("e", "", "a"), dep("d", "", "a"), dep("f", "", "a")],
                 id="divert-every-route"),
    pytest.param(D.divert_converge, [("c", "")], [dep("f", "", "c")], id="divert-one-route"),

    # a expands to b -> c; collapse into d; d -> e
    pytest.param(D.expand_collapse, [("a", "")], [dep("d", "", "a"), dep("e", "", "a")],
                 id="expand-skipped-to-collapse"),
    pytest.param(D.expand_collapse, [("b", "3")], [dep("c", "3", "b"), dep("d", "", "b"), dep("e", "", "b")],
                 id="element-to-collapse-in-parent-scope"),
    pytest.param(D.expand_collapse, [("c", "0")], [dep("d", "", "c"), dep("e", "", "c")], id="element-tail"),
    pytest.param(D.expand_collapse, [("b", "0"), ("b", "1")],
                 [dep("c", "0", "b"), dep("c", "1", "b"), dep("d", "", "b"), dep("e", "", "b")],
                 id="elements-collapse-once"),
    pytest.param(D.expand_collapse, [("c", "0"), ("b", "1")],
                 [dep("c", "1", "b"), dep("d", "", "c"), dep("e", "", "c")],
                 id="elements-first-declared-root-wins-bfs"),
    pytest.param(D.expand_collapse, [("b", "1"), ("d", "")], [dep("c", "1", "b"), dep("e", "", "d")],
                 id="collapse-root-excluded"),

    # a expands to b; b expands to c; c collapses into d; d collapses into e; e -> f
    pytest.param(D.nested_expand, [("a", "")], [dep("e", "", "a"), dep("f", "", "a")], id="nested-from-start"),
    pytest.param(D.nested_expand, [("b", "1")], [dep("d", "1", "b"), dep("e", "", "b"), dep("f", "", "b")],
                 id="nested-outer-element"),
    pytest.param(D.nested_expand, [("c", "1/2")], [dep("d", "1", "c"), dep("e", "", "c"), dep("f", "", "c")],
                 id="nested-inner-element"),
    pytest.param(D.nested_expand, [("c", "1/2"), ("c", "0/0")],
                 [dep("d", "0", "c"), dep("d", "1", "c"), dep("e", "", "c"), dep("f", "", "c")],
                 id="nested-two-outer-elements"),
    pytest.param(D.nested_expand, [("d", "4")], [dep("e", "", "d"), dep("f", "", "d")], id="nested-inner-collapse"),

    # a expands to b; b divides to [c, d]; combine into e; collapse into f
    pytest.param(D.divide_in_expand, [("b", "2")],
                 [dep("c", "2", "b"), dep("d", "2", "b"), dep("e", "2", "b"), dep("f", "", "b")],
                 id="divide-inside-expand"),
    pytest.param(D.divide_in_expand, [("c", "2"), ("d", "5")],
                 [dep("e", "2", "c"), dep("e", "5", "d"), dep("f", "", "c")],
                 id="combine-per-element-scope"),

    # the handler is not part of the graph
    pytest.param(D.with_on_halt, [("__on_halt__", "")], [], id="on_halt-has-no-dependents"),
]


@pytest.mark.parametrize(("build", "roots", "expected"), WALKS)
def test_dependents(build: Callable[[], Definition], roots: list[tuple[str, str]], expected: list[Dependent]) -> None:
    found = dependents(build(), roots)
    assert found == expected
    assert len({(d.step, d.scope) for d in found}) == len(found)  # no duplicates
    assert not {(d.step, d.scope) for d in found} & set(roots)  # roots excluded


@pytest.mark.parametrize(("build", "step", "scope", "expected"), [
    pytest.param(D.linear, "a", "", [("b", "")], id="chain"),
    pytest.param(D.linear, "d", "", [], id="last"),
    pytest.param(D.divide_combine, "a", "", [("b", ""), ("c", "")], id="divide"),
    pytest.param(D.divide_combine, "e", "", [("d", "")], id="combine"),
    pytest.param(D.divert_converge, "a", "", [("b", ""), ("c", ""), ("e", ""), ("d", "")], id="divert-all-routes"),
    pytest.param(D.divert_converge, "e", "", [("f", "")], id="converge"),
    pytest.param(D.expand_collapse, "a", "", [("d", "")], id="expand-to-collapse"),
    pytest.param(D.nested_expand, "b", "6", [("d", "6")], id="inner-expand-to-collapse"),
    pytest.param(D.expand_collapse, "b", "9", [("c", "9")], id="chain-in-element"),
    pytest.param(D.expand_collapse, "c", "9", [("d", "")], id="collapse-to-parent"),
    pytest.param(D.nested_expand, "c", "6/1", [("d", "6")], id="inner-collapse-to-parent"),
    pytest.param(D.with_on_halt, "__on_halt__", "", [], id="on_halt"),
    pytest.param(D.linear, "no_such_step", "", [], id="unknown-step"),
])
def test_successors(build: Callable[[], Definition], step: str, scope: str, expected: list[tuple[str, str]]) -> None:
    assert successors(build(), step, scope) == expected


@pytest.mark.parametrize(("scope", "index"), [
    pytest.param("", None, id="top-level"),
    pytest.param("3", 3, id="element"),
    pytest.param("1/12", 12, id="nested-element"),
])
def test_dependent_elem_index(scope: str, index: int | None) -> None:
    assert Dependent("b", scope, "a").elem_index == index
