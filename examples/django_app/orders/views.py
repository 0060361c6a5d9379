import json

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from orders.models import Order
from orders.payments import PaymentDeclined, authorize
from orders.pipelines import fulfil


def start_fulfilment(order_id: int) -> None:
    # The key makes a repeated call (a retried callback, a second deploy replaying
    # it) return the run already started instead of starting another.
    handle = fulfil.trigger(order_id, key=f"order:{order_id}")
    Order.objects.filter(pk=order_id).update(run_id=handle.id)


@csrf_exempt  # a JSON API for the example; forms keep Django's CSRF protection
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    try:
        data = json.loads(request.body)
        item, quantity, card = str(data["item"]), int(data["quantity"]), str(data["card"])
    except (ValueError, KeyError, TypeError):
        return JsonResponse({"error": "expected a JSON object with item, quantity and card"}, status=400)
    try:
        with transaction.atomic():
            order = Order.objects.create(item=item, quantity=quantity)
            # The run starts once the order is committed. Triggered here, inside the
            # transaction, a worker could claim it before the order is visible, and
            # a rollback below would leave a run for an order that never existed.
            transaction.on_commit(lambda: start_fulfilment(order.pk))
            authorize(card, quantity)
    except PaymentDeclined as exc:  # rolled back: no order, no run
        return JsonResponse({"error": str(exc)}, status=402)
    return JsonResponse({"order": order.pk}, status=201)


@require_GET
def order_status(request: HttpRequest, order_id: int) -> JsonResponse:
    order = get_object_or_404(Order, pk=order_id)
    return JsonResponse({"order": order.pk, "status": order.status, "tracking": order.tracking,
                         "run_id": order.run_id})
