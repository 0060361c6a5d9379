"""A step that marks, from inside, every moment it runs (tests/isolation): its
first attempt runs long, later ones briefly."""

from __future__ import annotations

import os
import subprocess
import time

import ductline
from ductline import Pipeline


def tick(path):
    attempt = ductline.context().attempt
    if attempt == 1:  # a process outside the child's group, which the child's own stop must end too
        spawned = subprocess.Popen(["sleep", "300"], start_new_session=True)
        with open(path + ".session", "w") as out:
            out.write(str(spawned.pid))
    end = time.monotonic() + (120 if attempt == 1 else 1)
    while time.monotonic() < end:
        with open(path, "a") as marks:
            marks.write(f"{attempt} {os.getpid()} {time.monotonic()}\n")
        time.sleep(0.02)
    return attempt


def add_one(x):
    return x + 1


marked = Pipeline("watchdog_marked").start(tick, max_crash=5)
healthy = Pipeline("watchdog_healthy").start(add_one)
