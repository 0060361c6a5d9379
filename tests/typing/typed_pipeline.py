"""A user's pipeline module written with full type hints: it must pass
``mypy --strict`` (and pyright) against ductline's public API."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import ductline
from ductline import Backoff, Pipeline, RunFailed, RunHandle, ScaledTimeout, WorkflowResult


@dataclass(frozen=True)
class Order:
    id: int
    lines: list[str]


def load(order_id: int) -> Order:
    return Order(order_id, ["a", "b"])


def size_of(order: Order) -> int:
    return len(order.lines)


def price(line: str) -> float:
    return 1.5


def total(prices: list[float]) -> float:
    return sum(prices)


orders = (
    Pipeline("typed_orders", timeout=timedelta(minutes=5))
    .start(load, timeout=ScaledTimeout(floor=10, cap=60, size=size_of), max_retry=2,
           retry_delay=Backoff.exponential(1, cap=30))
    .chain(to=size_of, isolation="thread", no_retry_on=[ValueError], log_level="DEBUG")
    .expand(to=price, rate=10.0, concurrency=4)
    .collapse(into=total, priority=5)
)


def run_locally() -> float:
    result: WorkflowResult = ductline.execute(orders, 7)
    output: object = result.output
    assert isinstance(output, float)
    return output


def run_on_workers(database: str) -> float | None:
    handle: RunHandle = orders.trigger(7, database=database, key="order-7")
    try:
        value: object = handle.result(timeout=30)
    except RunFailed as exc:
        print(exc.halt_reason, exc.error)
        return None
    return value if isinstance(value, float) else None
