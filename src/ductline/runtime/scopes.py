"""Scopes name where a step run sits inside nested ``expand`` fan-outs.

The top level is ``""``; element ``i`` of an expand at scope ``s`` is ``"i"`` when
``s`` is ``""`` and ``"s/i"`` otherwise.
"""

from __future__ import annotations


def child(scope: str, index: int) -> str:
    return str(index) if scope == "" else f"{scope}/{index}"


def parent(scope: str) -> str:
    return scope.rpartition("/")[0]


def element_index(scope: str) -> int | None:
    return None if scope == "" else int(scope.rpartition("/")[2])
