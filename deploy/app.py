"""The pipelines the files in this folder deploy: put your own module in its place
(the ``--app`` of the worker and of the dashboard)."""

from ductline import Pipeline


def receive(order):
    return {"order": order, "lines": 3}


def confirm(received):
    return f"order {received['order']} confirmed ({received['lines']} lines)"


orders = (
    Pipeline("orders", timeout=600)
    .start(receive, timeout=30)
    .chain(to=confirm, timeout=30)
)
