"""Fulfilling an order: reserve its stock, then ship it. The steps run in ductline's
step children (shop/worker.py set Django up there) and use the ORM."""

from django.db import close_old_connections, transaction

from ductline import Pipeline
from orders.models import Order


def reserve_stock(order_id: int) -> dict[str, object]:
    # A step child serves many attempts, with no request cycle to recycle its
    # database connection: drop one that is broken or too old, as a request would.
    close_old_connections()
    with transaction.atomic():
        order = Order.objects.select_for_update().get(pk=order_id)
        order.status = Order.RESERVED
        order.save(update_fields=["status"])
    return {"order": order.pk, "item": order.item, "quantity": order.quantity}


def ship(reservation: dict[str, object]) -> str:
    close_old_connections()
    tracking = f"TRK-{reservation['order']:06d}"
    Order.objects.filter(pk=reservation["order"]).update(status=Order.SHIPPED, tracking=tracking)
    return tracking


fulfil = (
    Pipeline("fulfil_order", timeout=3600)
    .start(reserve_stock, timeout=60, max_retry=3)
    .chain(to=ship, timeout=60, max_retry=3)
)
