"""Pipeline definitions shared by the rulebook's unit tests (`test_rules_*.py`),
built with the real DSL from the module-level steps of `steps_for_tests`.

Each builder returns a fresh `Definition` under a unique pipeline name; the step
names used by the tests are given in each docstring.
"""

from __future__ import annotations

from typing import Any

import steps_for_tests as S
from ductline import Pipeline
from ductline.dsl.graph import Definition


def input_size(*args: Any) -> int:
    """The size function of a `ductline.ScaledTimeout` (must be importable by name)."""
    return 0


def new(prefix: str = "rules", **kwargs: Any) -> Pipeline:
    return Pipeline(S.unique_name(prefix), **kwargs)


def linear() -> Definition:
    """a -> b -> c -> d."""
    return new().start(S.a).chain(to=S.b).chain(to=S.c).chain(to=S.d).definition()


def divide_combine() -> Definition:
    """a divides to [b, c]; b is extended by e; [e, c] combine into d; d -> f."""
    p = new().start(S.a).divide(to=[S.b, S.c])
    p.branch(S.b).chain(to=S.e)
    return p.combine(into=S.d).chain(to=S.f).definition()


def divert_converge() -> Definition:
    """a diverts on "x" -> b, "1" -> c, "True" -> e, otherwise -> d; they converge into f."""
    return (new().start(S.a)
            .divert(to={"x": S.b, "1": S.c, "True": S.e, "otherwise": S.d})
            .converge(into=S.f).definition())


def expand_collapse() -> Definition:
    """a expands to b -> c (per element); the elements collapse into d; d -> e."""
    return (new().start(S.a).expand(to=S.b).chain(to=S.c)
            .collapse(into=S.d).chain(to=S.e).definition())


def nested_expand() -> Definition:
    """a expands to b; b expands to c; c collapses into d (per element of a); d
    collapses into e; e -> f."""
    return (new().start(S.a).expand(to=S.b).expand(to=S.c)
            .collapse(into=S.d).collapse(into=S.e).chain(to=S.f).definition())


def divide_in_expand() -> Definition:
    """a expands to b; b divides to [c, d]; they combine into e; the elements
    collapse into f."""
    return (new().start(S.a).expand(to=S.b).divide(to=[S.c, S.d])
            .combine(into=S.e).collapse(into=S.f).definition())


def with_on_halt() -> Definition:
    """a -> b, with ``halt_handler`` as the ``on_halt`` handler (``__on_halt__``)."""
    return new().start(S.a).chain(to=S.b).on_halt(S.halt_handler).definition()
