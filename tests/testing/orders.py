"""A small order pipeline, written as an application would write it, for the
examples of `ductline.testing` (tests/testing/test_orders_example.py)."""

from __future__ import annotations

import logging
from datetime import timedelta

from ductline import Pipeline

log = logging.getLogger("orders")


class PaymentGateway:
    """Stands for a real payment service; tests replace `charge_card`."""

    @staticmethod
    def charge_card(order_id: int, cents: int) -> str:
        raise ConnectionError("no payment service in this example")


def validate(order):
    if order["cents"] <= 0:
        raise ValueError(f"order {order['id']} has no amount")
    return order


def reserve(order):
    log.info("reserving stock for order %s", order["id"])
    return {**order, "reserved": True}


def charge(order):
    receipt = PaymentGateway.charge_card(order["id"], order["cents"])
    return {**order, "receipt": receipt}


def ship(order):
    return {**order, "shipped": True}


def notify(order):
    print(f"order {order['id']} shipped")
    return {"id": order["id"], "receipt": order["receipt"]}


# Stock is reserved a day after validation (the cooling-off period); a charge is
# retried twice, a minute apart (max_retry counts every attempt).
orders = (
    Pipeline("orders", timeout=timedelta(days=3))
    .start(validate)
    .chain(to=reserve, delay=timedelta(days=1))
    .chain(to=charge, max_retry=3, retry_delay=60)  # three attempts: two retries
    .chain(to=ship)
    .chain(to=notify)
)


def approve(order):
    return {**order, "approved": True}


# Large orders wait for a person, at most a day.
large_orders = (
    Pipeline("large_orders")
    .start(validate)
    .chain(to=approve)
    .chain(to=ship)
    .pause(before=approve, timeout=timedelta(days=1))
)

slow_orders = Pipeline("slow_orders", timeout=timedelta(hours=2)).start(validate).chain(
    to=ship, delay=timedelta(days=1))


def split(order):
    return [{**order, "line": n} for n in range(order["lines"])]


def pack(line):
    return line["line"]


def count(packed):
    return len(packed)


# Packing calls a rate-limited service: one line an hour, one at a time.
packing = (
    Pipeline("packing")
    .start(split)
    .expand(to=pack, rate=1 / 3600, concurrency=1, delay=60)
    .collapse(into=count)
)
