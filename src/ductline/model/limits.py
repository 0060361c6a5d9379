"""Concurrency and rate limits of steps: the key a limited job is counted under.

A limit key is ``"<pipeline>:<step>"``, or ``"<pipeline>:<step>:<value>"`` when the
step names a ``concurrency_key``: ``<value>`` is the JSON text of that field of the
step's first argument (``null`` when the argument is not a dict or lacks the field,
so such jobs share one limit). The key is fixed when the job is created, so every
attempt of a job is counted under the same key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ductline.dsl.graph import Definition
from ductline.dsl.options import StepOptions

MAX_KEY_VALUE = 200  # characters of the key's value kept (longer values are cut)


@dataclass(frozen=True, slots=True)
class StepLimit:
    """A step's limits per limit key: at most ``concurrency`` running attempts and
    ``rate`` starts per second (either may be ``None``)."""

    concurrency: int | None
    rate: float | None


def limit_key(pipeline: str, step: str, options: StepOptions, input_json: str) -> str | None:
    """The limit key of a new job of ``step`` whose input (a JSON list of positional
    arguments) is ``input_json``; ``None`` when the step is not limited."""
    if not options.limited:
        return None
    base = f"{pipeline}:{step}"
    if options.concurrency_key is None:
        return base
    value: Any = None
    try:
        args = json.loads(input_json)
    except ValueError:  # pragma: no cover - inputs are written by ductline's codec
        args = None
    if isinstance(args, list) and args and isinstance(args[0], dict):
        value = args[0].get(options.concurrency_key)
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return f"{base}:{text[:MAX_KEY_VALUE]}"


def step_limits(definitions: dict[str, Definition]) -> dict[tuple[str, str], StepLimit]:
    """``{(pipeline, step): StepLimit}`` for every limited step of ``definitions``."""
    found = {}
    for definition in definitions.values():
        for node in definition.nodes.values():
            if node.options.limited:
                found[(definition.name, node.name)] = StepLimit(node.options.concurrency, node.options.rate)
    return found
