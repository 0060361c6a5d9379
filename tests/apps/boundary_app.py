"""Steps that cross an irreversible boundary (`ductline.cross_boundary`) and then hang
or fail: no path may run them again except a forced retry naming them."""

from __future__ import annotations

import time
from pathlib import Path

import ductline
from ductline import Pipeline


def pays_then_hangs(marker):
    ductline.cross_boundary("charged the card")
    Path(marker).write_text(str(ductline.context().attempt))  # one line per run of the step
    time.sleep(120)
    return marker


def after(value):
    return value


hang = Pipeline("boundary_hang").start(pays_then_hangs, max_retry=3, max_crash=5).chain(to=after)


def _wait_for(path: str) -> None:
    deadline = time.monotonic() + 60
    while not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def fails_at_once(marker):
    _wait_for(marker + ".crossed")  # the other branch is past its boundary: halt now
    raise RuntimeError("no stock")


def pays_then_fails(marker):
    ductline.cross_boundary("shipped the parcel")
    Path(marker + ".crossed").write_text("")
    _wait_for(marker + ".halted")  # fail after the other branch halted the run: its reason stands
    raise RuntimeError("carrier refused")


def gather(values):
    return values


two_branches = (Pipeline("boundary_branches").start(after)
                .divide(to=[fails_at_once, pays_then_fails], max_retry=1, retry_delay=0).combine(into=gather))
