"""Transitive dependents of step runs: the breadth-first walk that skips what can
no longer run once a run is stopped (run deadline, cancel, an expired pause).

An expand's elements live in child scopes whose number is unknown until the expand
runs, so the walk does not enter an expand; it continues at the matching collapse,
in the parent scope. Each dependent keeps the step it was reached from (its *skip
root*), so a reader can tell why it never ran.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ductline.dsl.graph import Definition, TransitionKind
from ductline.model import scopes


@dataclass(frozen=True, slots=True)
class Dependent:
    """A step run reached by the walk: ``step`` at ``scope``, reached from ``root``."""

    step: str
    scope: str
    root: str

    @property
    def elem_index(self) -> int | None:
        """The element index a job of this step run records (``None`` at top level)."""
        return scopes.element_index(self.scope)


def successors(definition: Definition, step: str, scope: str) -> list[tuple[str, str]]:
    """The step runs that directly follow ``(step, scope)`` whatever its output
    (every route of a divert; an expand's collapse instead of its elements)."""
    node = definition.nodes.get(step)
    transition = None if node is None else node.next
    if transition is None:
        return []
    if transition.kind is TransitionKind.EXPAND:
        return [] if transition.collapse is None else [(transition.collapse, scope)]
    if transition.kind is TransitionKind.COLLAPSE:
        return [(transition.targets[0], scopes.parent(scope))]
    return [(target, scope) for target in transition.targets]


def dependents(definition: Definition, roots: list[tuple[str, str]]) -> list[Dependent]:
    """Every step run reachable from ``roots`` (``(step, scope)`` pairs).

    Returns:
        The dependents in breadth-first order, without the roots themselves and
        without duplicates. The roots are walked in declaration order (then
        element order), whatever order they are given in, so a step run reachable
        from several roots keeps the same root in every driver.
    """
    order = {name: i for i, name in enumerate(definition.nodes)}
    roots = sorted(set(roots), key=lambda r: (order.get(r[0], len(order)), scopes.sort_key(r[1]), r[0]))
    seen = set(roots)
    queue = deque((step, scope, step) for step, scope in roots)
    found: list[Dependent] = []
    while queue:
        step, scope, root = queue.popleft()
        for item in successors(definition, step, scope):
            if item not in seen:
                seen.add(item)
                found.append(Dependent(item[0], item[1], root))
                queue.append((item[0], item[1], root))
    return found
