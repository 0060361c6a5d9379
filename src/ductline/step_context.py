"""`ductline.context()`: what a running step knows about itself.

Inside a worker the step runs in a child process that never talks to the database;
``get``, ``set`` and `cross_boundary` are requests to the worker parent, which
performs them and answers once they are committed.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from ductline import codec
from ductline.errors import ExecutionError
from ductline.model import context_keys

# A context variable, not a global: steps with isolation="thread" run side by side
# in threads of one worker process, each with its own context.
_current: ContextVar["StepContext | None"] = ContextVar("ductline_step_context", default=None)


@dataclass(slots=True)
class StepContext:
    """The context of the attempt being executed.

    Attributes:
        run_id: the run's id.
        job_id: the job's id (stable across its attempts).
        step: the step's name.
        attempt: 1 for the first attempt, then 2, 3, ... (an attempt given back
            by its worker before the step began counts too: error type ``Released``
            in docs/concepts/vocabulary.md).
        deadline: when the attempt will be killed (aware UTC datetime), or ``None``.
        idempotency_key: ``"<job_id>"``, the same for every attempt of this step
            run; pass it to external services that deduplicate requests.
    """

    run_id: str
    job_id: str
    step: str
    attempt: int
    deadline: datetime | None
    _request: Callable[[str, tuple[Any, ...]], Any]

    @property
    def idempotency_key(self) -> str:
        return self.job_id

    def get(self, key: str, default: Any = None) -> Any:
        """Read a value of the run's key/value store (shared by all its steps)."""
        context_keys.check_key(key)  # the store applies the same rule
        raw = self._request("context_get", (key,))
        return default if raw is None else codec.loads(raw)

    def set(self, key: str, value: Any, *, overwrite: bool = False) -> None:
        """Store a value for the run (JSON rule applies).

        Raises:
            ExecutionError: the key is already set and ``overwrite`` is false, or
                the attempt lost its lease (nothing was stored).
            TypeError: the value does not round-trip through JSON, or the key is
                not a non-empty str without NUL or lone surrogates.
        """
        context_keys.check_key(key)  # the store applies the same rule
        encoded = codec.dumps(value, what=f"context value {key!r}")
        if not self._request("context_set", (key, encoded, overwrite)):
            raise ExecutionError(f"context key {key!r} is already set; pass overwrite=True to replace it")


def context() -> StepContext:
    """The context of the step running in this process.

    Raises:
        ExecutionError: when called outside a running step.
    """
    ctx = _current.get()
    if ctx is None:
        raise ExecutionError("ductline.context() is only available inside a running step")
    return ctx


def cross_boundary(reason: str) -> None:
    """Durably record that this attempt is about to do something irreversible or paid.

    Returns only after the record is committed. A failure, timeout or crash after
    this point is not retried automatically: the run halts with ``unsafe_to_retry``
    and an operator decides (``ductline retry RUN_ID --force``). Source: the
    "safe-only retry" rule (docs/howto/retries.md, "Safe-only retry").

    Raises:
        ExecutionError: outside a running step, or when the lease was lost.
    """
    if not isinstance(reason, str) or not reason:
        raise TypeError("cross_boundary(reason) needs a non-empty str")
    ctx = context()
    if not ctx._request("boundary", (codec.clean_text(reason),)):
        raise ExecutionError("the attempt's lease was lost; it must not cross the boundary")


def activate(ctx: StepContext | None) -> None:
    _current.set(ctx)


def utc_from_ms(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
