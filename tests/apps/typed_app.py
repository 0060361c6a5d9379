"""Pipelines whose steps return user types (tests/runtime/test_parent_values.py).
Imported by workers as ``typed_app`` from tests/apps.

``Item.__post_init__`` writes the pid of every process that builds an item to the
file ``TYPED_PIDS`` names; once the file ``TYPED_POISON`` names exists, building an
item raises. A worker parent that rebuilt outputs would show up in the pid file, or
(poisoned) drop the outcome and run the step again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum

import ductline
from ductline import Pipeline


@dataclass
class Item:
    n: int

    def __post_init__(self) -> None:
        armed = os.environ.get("TYPED_ARMED")  # count only builds after this file appears
        if armed is None or os.path.exists(armed):
            with open(os.environ["TYPED_PIDS"], "a") as fh:
                fh.write(f"{os.getpid()}\n")
        if os.path.exists(os.environ["TYPED_POISON"]):
            raise RuntimeError(f"Item({self.n}) was built after its step returned")


class Size(Enum):
    SMALL = 1
    LARGE = 2


def items(n: int) -> list[Item]:
    return [Item(i) for i in range(n)]


def poisoned_items(n: int) -> list[Item]:
    made = [Item(i) for i in range(n)]
    open(os.environ["TYPED_POISON"], "w").close()  # from now on, building an Item raises
    return made


def double(item: Item) -> int:
    return item.n * 2


def total(values: list[int]) -> int:
    return sum(values)


def size_of(n: int) -> Size:
    return Size.LARGE if n > 10 else Size.SMALL


def big(size: Size) -> str:
    return f"big:{size.name}"


def small(size: Size) -> str:
    return f"small:{size.name}"


def done(label: str) -> str:
    return label


expand_items = Pipeline("typed_expand").start(items).expand(to=double).collapse(into=total)
poisoned = Pipeline("typed_poisoned").start(poisoned_items, max_retry=1).expand(to=double, max_retry=1) \
    .collapse(into=total)
divert_enum = (Pipeline("typed_divert").start(size_of)
               .divert(to={"Size.LARGE": big, "otherwise": small}).converge(into=done))


def measure(item: Item) -> int:
    return item.n


scheduled = Pipeline("typed_scheduled").start(measure)
if os.environ.get("TYPED_SCHEDULE"):  # its argument is built where the module is imported
    ductline.schedule(scheduled, cron="* * * * * *", args=(Item(3),), name="typed_every_second")
