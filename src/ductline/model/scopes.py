"""Scopes name where a step run sits inside nested ``expand`` fan-outs.

The top level is ``""``; element ``i`` of an expand at scope ``s`` is ``"i"`` when
``s`` is ``""`` and ``"s/i"`` otherwise.
"""

from __future__ import annotations


def child(scope: str, index: int) -> str:
    """The scope of element ``index`` of an expand that runs at ``scope``."""
    return str(index) if scope == "" else f"{scope}/{index}"


def parent(scope: str) -> str:
    """The scope of the expand (and its collapse) that encloses ``scope``."""
    return scope.rpartition("/")[0]


def element_index(scope: str) -> int | None:
    """The innermost element index, ``None`` at top level."""
    return None if scope == "" else int(scope.rpartition("/")[2])


def sort_key(scope: str) -> tuple[int, ...]:
    """Element order: ``"2"`` before ``"10"``, and ``"1/3"`` after ``"1"``."""
    return () if scope == "" else tuple(int(part) for part in scope.split("/"))
