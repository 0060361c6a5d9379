"""A pipeline for the browser test: its first step fails until a gate file exists,
so a run halts, and a retry after opening the gate completes it (imported by the
worker and the dashboard as ``web_app``)."""

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
    time.sleep(1.5)  # long enough for the browser to see the revived run running
    return {**order, "shipped": True}


gated = Pipeline("web_gated").start(open_gate, max_retry=2, retry_delay=0).chain(to=ship)
