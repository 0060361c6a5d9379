"""Helpers of the in-process executor tests (import as `local_helpers`)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Callable


class FakeClock:
    """Records every delay; sleeps ``scale`` times as long for real (0: not at all)."""

    def __init__(self, scale: float = 0.0) -> None:
        self.scale = scale
        self.sleeps: list[float] = []
        self.skipped = 0.0

    async def sleep(self, seconds: float) -> None:
        # Recorded in whole seconds (every delay of these tests is): the executor
        # sleeps until a time on its store's clock, and real milliseconds pass between
        # the write that set the time and the sleep.
        self.sleeps.append(round(seconds))
        self.skipped += seconds * (1 - self.scale)
        await asyncio.sleep(seconds * self.scale)

    def now(self) -> float:
        return asyncio.get_running_loop().time() + self.skipped


async def until(condition: Callable[[], bool], timeout: float = 30.0, interval: float = 0.01) -> None:
    """Wait in the event loop until ``condition()`` holds.

    Raises:
        AssertionError: it did not hold within ``timeout`` seconds.
    """
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(interval)


def child_processes() -> list[tuple[int, str, str]]:
    """``(pid, state, cmdline)`` of every child of this process (zombies included)."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == me:
            found.append((int(entry), fields[0], cmdline))
    return found


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def read_pids(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [int(line) for line in path.read_text().split()]
