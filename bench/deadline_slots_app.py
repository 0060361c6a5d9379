"""Steps for bench/deadline_slots.py: a quick first step, then one stuck in C past
the run's 3 s deadline. Each step notes when it began (wall clock, ms) and its
process id in a file of ``DUCTLINE_BENCH_STARTS`` (one file per attempt)."""

import ctypes
import os
import time
import uuid

from ductline import Pipeline


def _note(what: str, run: int) -> None:
    folder = os.environ["DUCTLINE_BENCH_STARTS"]
    name = os.path.join(folder, uuid.uuid4().hex)
    with open(name + ".tmp", "w") as out:
        out.write(f"{what} {run} {time.time() * 1000:.3f} {os.getpid()}\n")
    os.replace(name + ".tmp", name)  # the bench reads only whole notes


def begin(run):
    _note("begin", run)
    return run


def stuck(run):
    _note("stuck", run)
    ctypes.CDLL(None).sleep(60)


pipeline = Pipeline("bench_deadline_slots", timeout=3).start(begin).chain(to=stuck)

# One step only: the run's clock starts with the claim of its stuck step.
single = Pipeline("bench_deadline_slots_single", timeout=3).start(stuck)
