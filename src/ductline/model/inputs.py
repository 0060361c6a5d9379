"""`NO_INPUT`: the input of a resume that keeps what the paused step would have
received (pure; every layer that resumes a pause names it)."""

from __future__ import annotations

from typing import Any


class _NoInput:
    def __repr__(self) -> str:
        return "NO_INPUT"


NO_INPUT: Any = _NoInput()
"""A resume without ``input``: the step keeps the input it was paused with."""
