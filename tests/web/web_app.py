"""A pipeline for the browser test: its first step fails until a gate file exists,
so a run halts, and a retry after opening the gate completes it; its second step
waits for a second gate (``.ship`` beside the first), so the browser sees the
revived run running however slow the machine (imported by the worker and the
dashboard as ``web_app``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ductline import Pipeline


def open_gate(order):
    gate = Path(os.environ["WEB_GATE_FILE"])
    if not gate.exists():
        raise RuntimeError(f"gate closed: {gate.name} does not exist yet")
    return {"order": order, "gate": "open"}


def ship(order):
    gate = Path(os.environ["WEB_GATE_FILE"] + ".ship")
    end = time.monotonic() + 300  # a bound, so a failing test cannot leave it forever
    while not gate.exists() and time.monotonic() < end:
        time.sleep(0.01)
    return {**order, "shipped": True}


gated = Pipeline("web_gated").start(open_gate, max_retry=2, retry_delay=0).chain(to=ship)
