"""Helpers shared by the tests (import as `helpers`)."""

from __future__ import annotations

import time
from typing import Callable


def wait_for(condition: Callable[[], object], timeout: float = 30.0, interval: float = 0.02) -> object:
    """Poll until ``condition()`` is truthy; fail the test after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"condition not met within {timeout} s: {condition}")
        time.sleep(interval)
