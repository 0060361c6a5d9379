"""Transitive dependents of a step run: the breadth-first walk used to skip what
can no longer run (run deadline, cancel).

Scopes follow `ductline.runtime.scopes`: an expand's elements live in child scopes
whose number is unknown until the expand runs, so the walk does not enter an
expand; it continues at the matching collapse, in the parent scope.
"""

from __future__ import annotations

from collections import deque

from ductline.dsl.graph import Definition, TransitionKind


def _parent(scope: str) -> str:
    return scope.rpartition("/")[0]


def dependents(definition: Definition, roots: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """Every step run reachable from ``roots`` (``(step, scope)`` pairs).

    Returns:
        ``(step, scope, root_step)`` in breadth-first order, without the roots
        themselves and without duplicates.
    """
    seen = set(roots)
    queue = deque((step, scope, step) for step, scope in roots)
    found: list[tuple[str, str, str]] = []
    while queue:
        step, scope, root = queue.popleft()
        node = definition.nodes.get(step)
        transition = None if node is None else node.next
        if transition is None:
            continue
        kind = transition.kind
        if kind is TransitionKind.EXPAND:
            nexts = [] if transition.collapse is None else [(transition.collapse, scope)]
        elif kind is TransitionKind.COLLAPSE:
            nexts = [(transition.targets[0], _parent(scope))]
        else:
            nexts = [(target, scope) for target in transition.targets]
        for item in nexts:
            if item not in seen:
                seen.add(item)
                found.append((item[0], item[1], root))
                queue.append((item[0], item[1], root))
    return found
