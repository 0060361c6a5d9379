"""Fixtures of the in-process executor tests: a fast clock, and a check after
every test that no child process is left behind (running or zombie)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from local_helpers import FakeClock, child_processes  # noqa: E402


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(autouse=True)
def no_leaked_children() -> Iterator[None]:
    before = {pid for pid, _, _ in child_processes()}
    yield
    left = [p for p in child_processes() if p[0] not in before]
    assert not left, f"child processes left behind: {left}"
