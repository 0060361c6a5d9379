"""Pipelines for the operating-feature tests (issue 8): backoff, retry requests,
retry_on / no_retry_on. Imported by workers as ``ops_app`` from tests/apps."""

from __future__ import annotations

import ductline
from ductline import Backoff, Pipeline


class PaymentDeclined(Exception):
    pass


def declined(x):
    raise PaymentDeclined(f"card declined for {x}")


never_retried = Pipeline("ops_never_retried").start(declined, max_retry=5, retry_delay=0,
                                                     no_retry_on=[PaymentDeclined])


def key_error_twice(x):
    attempt = ductline.context().attempt
    if attempt < 3:
        raise KeyError(f"missing on attempt {attempt}")
    return {"x": x, "attempt": attempt}


always_retried = Pipeline("ops_always_retried").start(key_error_twice, max_retry=1, retry_delay=0,
                                                      retry_on=["KeyError"])


def asks_for_retry(x):
    attempt = ductline.context().attempt
    if attempt < 3:
        raise ductline.Retry(delay=1, reason=f"not ready on attempt {attempt}")
    return attempt


requested_retry = Pipeline("ops_requested_retry").start(asks_for_retry, max_retry=1)


def always_fails(x):
    raise RuntimeError("still broken")


linear_backoff = Pipeline("ops_linear_backoff").start(always_fails, max_retry=3,
                                                      retry_delay=Backoff.linear(1, cap=2))
