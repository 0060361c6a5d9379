"""The fleet test's pipeline: expand 20, collapse, chain (imported as ``fleet_app``).
Its first step waits for the file named by ``FLEET_GATE``, if that is set.

With ``FLEET_CLAIM_LOG`` set to a folder, a worker process that imports this app
appends one line per claim to ``claims-<pid>.txt`` in it: the monotonic time of the
claim's end, its duration in seconds, the jobs asked for and the jobs claimed (read
by bench/fleet.py and bench/history.py).
"""

from __future__ import annotations

import os
import time
from typing import Any

from ductline import Pipeline

WIDTH = 20


def elements(n: int) -> list[int]:
    # With FLEET_GATE set, the first steps wait until that file exists: the fleet test
    # opens it once a worker was killed, so kills land while the runs are in flight.
    gate = os.environ.get("FLEET_GATE")
    end = time.monotonic() + 120  # a bound, so a failing test cannot hold them forever
    while gate and not os.path.exists(gate) and time.monotonic() < end:
        time.sleep(0.01)
    return list(range(n))


def work(x: int) -> int:
    return x * x


def total(xs: list[int]) -> int:
    return sum(xs)


def finish(t: int) -> dict[str, int]:
    return {"total": t}


fleet = (Pipeline("fleet").start(elements).expand(to=work).collapse(into=total)
         .chain(to=finish))


def expected(n: int) -> dict[str, int]:
    return {"total": sum(x * x for x in range(n))}


def _record_claims(folder: str) -> None:
    from ductline.observability.events import EventName, subscribe

    path = os.path.join(folder, f"claims-{os.getpid()}.txt")
    fh = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - open for the process's life

    def on_event(name: EventName, attributes: dict[str, Any]) -> None:
        if name == EventName.CLAIM:
            fh.write(f"{time.monotonic():.6f} {attributes['duration_seconds']:.6f} "
                     f"{attributes['asked']} {attributes['claimed']}\n")

    subscribe(on_event)


if os.environ.get("FLEET_CLAIM_LOG"):  # children write nothing: only worker parents claim
    _record_claims(os.environ["FLEET_CLAIM_LOG"])
