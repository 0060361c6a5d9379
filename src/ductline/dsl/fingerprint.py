"""The fingerprint of a definition: what identifies one version of a pipeline's
graph among deploys.

A run records the fingerprint of the definition it started with, and a worker
claims only jobs of the definitions it loaded (docs/howto/rolling-deploy.md), so
old and new code can serve one database while a deploy rolls: a run keeps being
routed by the graph it started with.

The fingerprint covers what decides where a run goes next -- the pipeline's name,
its start step, every step's name and depth, each transition (kind, targets,
routes, fan-in sources and order, the expand's gathering step), the steps that
pause or wait for an event, the halt handler's presence and each step's queue -- and nothing a worker
may change without moving a run: the code inside a step, its module path, its
timeouts, budgets, delays, priorities and limits. A fix to a step's code is
therefore no new version; a renamed step, a new branch or a step sent to another
queue is.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ductline.dsl.graph import Definition

# Hex digits kept: 64 bits, far from any collision among a pipeline's versions.
LENGTH = 16
# How many digits to show where people read them (CLI, dashboard, logs).
SHORT = 8


def fingerprint(definition: Definition) -> str:
    """The fingerprint of ``definition``: ``LENGTH`` lowercase hex digits of a
    SHA-256 over the canonical JSON of its routing (see the module docstring)."""
    steps: list[dict[str, Any]] = []
    for node in definition.nodes.values():
        move = node.next
        steps.append({
            "name": node.name, "depth": node.depth, "queue": definition.queue_of(node.name),
            "next": None if move is None else {
                "kind": move.kind.value, "targets": list(move.targets), "routes": list(move.routes),
                "branch_index": move.branch_index, "sources": list(move.sources), "collapse": move.collapse,
            },
        })
    shape = {
        "pipeline": definition.name, "start": definition.start, "steps": steps,
        "pauses": sorted(definition.pauses), "waits": sorted(definition.waits),
        "on_halt": None if definition.on_halt is None else definition.queue_of(definition.on_halt.name),
    }
    text = json.dumps(shape, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:LENGTH]


def short(value: str) -> str:
    """A fingerprint as people read it (its first `SHORT` digits; ``"-"`` for a run
    started before versions were recorded)."""
    return value[:SHORT] if value else "-"
