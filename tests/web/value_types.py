"""User types for the dashboard's value tests (imported as ``value_types``). Once
``REFUSE`` is set, building an `Invoice` raises: a reader that rebuilt one would fail."""

from __future__ import annotations

import dataclasses
import enum

REFUSE = False


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Invoice:
    number: int
    lines: tuple

    def __post_init__(self) -> None:
        if REFUSE:
            raise RuntimeError("an Invoice was rebuilt")
