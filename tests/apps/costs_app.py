"""A step whose first attempt fails before its boundary (a free failure, retried) and
whose second crosses its boundary and then fails (a paid failure: the run halts
``unsafe_to_retry``). Imported by workers as ``costs_app``."""

from __future__ import annotations

import ductline
from ductline import Pipeline


def charge(order):
    if ductline.context().attempt == 1:
        raise ConnectionError("the payment service did not answer")
    ductline.cross_boundary("charged the card")
    raise RuntimeError("the receipt could not be written")


charged = Pipeline("costs_charge").start(charge, max_retry=3, retry_delay=0)
