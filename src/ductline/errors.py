"""The exception hierarchy: one root, `DuctlineError`, with a family per layer.

Driver errors (sqlite3, psycopg) are translated into `StoreError` at the store's
edge so callers never need to import a driver to handle a failure.
"""

from __future__ import annotations


class DuctlineError(Exception):
    """Root of every error ductline raises on purpose."""


class DefinitionError(DuctlineError):
    """A pipeline definition is structurally wrong (raised at import time)."""


class ConfigurationError(DuctlineError):
    """A setting (database URL, environment variable, TOML file) is invalid."""


class StoreError(DuctlineError):
    """The database could not be reached or refused an operation."""


class StoreUnavailable(StoreError):
    """The database is down or unreachable; the operation may be retried.

    Args:
        message: what failed, with the driver's reason.
        permanent: the database answered and refused this process for a reason
            that waiting does not cure (PostgreSQL: the database or role does not
            exist, authentication failed; SQLite: the file's directory is missing
            or not accessible). A worker starting up exits at once on such a
            refusal instead of waiting for the database. ``False`` for a database
            that is down, restarting or out of connections.
    """

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent

    def __reduce__(self) -> tuple[object, ...]:
        return (_store_unavailable, (str(self), self.permanent))


def _store_unavailable(message: str, permanent: bool) -> StoreUnavailable:
    return StoreUnavailable(message, permanent=permanent)


class DatabaseReplaced(StoreError):
    """The SQLite database file this process opened was deleted or replaced by
    another file, or reads as malformed (overwritten in place, or corrupt). Not
    transient: writing on would go into an orphaned or damaged file, so workers stop."""


class SchemaError(StoreError):
    """The database schema is missing or newer than this version of ductline."""


class RunNotFound(DuctlineError, LookupError):
    """No run has the given id."""


class ScheduleNotFound(DuctlineError, LookupError):
    """No schedule has the given name."""


class PipelineNotFound(DuctlineError, LookupError):
    """No pipeline of the given name is known to this process."""


class DefinitionNotFound(DuctlineError, LookupError):
    """No definition a worker loaded has that fingerprint (or a prefix names several)."""


class InvalidStateError(DuctlineError):
    """The requested operation does not apply to the run's current state."""


class TooManyKeptEvents(InvalidStateError):
    """A send was refused: the run keeps as many events as it may (the
    ``max_kept_events`` setting) that no wait has consumed yet, and this one would
    be kept too. Nothing was written; the events already kept are unchanged. A
    send that a waiting step consumes at once, and a repeat of a keyed send, are
    never refused for it. The CLI exits 2; the API answers 409.

    Args:
        run_id: the run.
        kept: the events it keeps now.
        limit: the ``max_kept_events`` setting of the sender.
    """

    def __init__(self, run_id: str, kept: int, limit: int) -> None:
        self.run_id, self.kept, self.limit = run_id, kept, limit
        super().__init__(f"run {run_id} keeps {kept} events that no wait has consumed yet, the most it may "
                         f"(max_kept_events = {limit}); this event was refused and nothing was written")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.run_id, self.kept, self.limit))


TooManyKeptEvents.__module__ = "ductline"


class TargetError(DuctlineError):
    """A `module:attr` or `path.py:attr` target could not be loaded."""


class RunFailed(DuctlineError):
    """A run ended without completing: `RunHandle.result` raises it.

    Attributes:
        run_id: the run.
        status: ``halted``, ``failed`` or ``cancelled``.
        halt_reason: e.g. ``job_retries_exhausted`` (``None`` for a cancel).
        error: what went wrong, as `RunHandle.error` says it.
    """

    def __init__(self, run_id: str, status: str, halt_reason: str | None, error: str | None) -> None:
        self.run_id, self.status, self.halt_reason, self.error = run_id, str(status), halt_reason, error
        # The error of a halted run already ends with its reason (`store.run_errors`):
        # the reason is said once, after the status when the error does not say it.
        said = bool(error) and bool(halt_reason) and str(error).endswith(f"({halt_reason})")
        reason = f" ({halt_reason})" if halt_reason and not said else ""
        super().__init__(f"run {run_id} {status}{reason}" + (f": {error}" if error else ""))

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.run_id, self.status, self.halt_reason, self.error))


class ExecutionError(DuctlineError):
    """Raised inside a step when the ductline context cannot serve a request."""


class LeaseLost(ExecutionError):
    """A write on behalf of an attempt that no longer holds its lease (its run was
    cancelled or ended, or the lease expired and was taken back): nothing of it
    was stored. The step sees it as `ExecutionError` with this message."""

    def __init__(self, job_id: str, what: str) -> None:
        self.job_id, self.what = job_id, what
        super().__init__(f"the attempt's lease was lost (its run was cancelled or ended, or the lease expired); "
                         f"{what} was not stored")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.job_id, self.what))


class PayloadTooLarge(DuctlineError, ValueError):
    """A value's JSON encoding is above the hard payload limit (``payload_max_bytes``,
    default 64 MiB; see `ductline.store.payloads`).

    Raised inside the child for a step's output (the attempt is recorded ``errored``
    with ``error_type="ductline.PayloadTooLarge"`` and, being deterministic, is not
    retried: the run halts with ``non_retryable_error`` unless the step's
    ``retry_on`` names it), and by ``trigger`` for oversized arguments (before
    anything is written).

    Args:
        what: the value, e.g. ``"output of step 'load'"`` or ``"trigger arguments"``.
        size: its size in bytes (UTF-8 JSON text).
        limit: the limit in bytes.
    """

    def __init__(self, what: str, size: int, limit: int) -> None:
        self.what, self.size, self.limit = what, size, limit
        super().__init__(f"{what}: {size} bytes of JSON exceed the limit of {limit} bytes (payload_max_bytes)")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.what, self.size, self.limit))


PayloadTooLarge.__module__ = "ductline"


class PayloadNotSerializable(DuctlineError, TypeError):
    """A value does not round-trip through JSON (docs/howto/payloads.md, "Values: the
    JSON rule"): e.g. ``bytes``, a set, a naive ``datetime`` or an object of a class
    ductline does not encode. A ``TypeError``, so code that catches ``TypeError``
    still catches it.

    Raised by ``trigger`` for arguments (before anything is written), and inside the
    child for a step's output: the attempt is recorded ``errored`` with
    ``error_type="ductline.PayloadNotSerializable"`` and, being deterministic (the same
    output fails the same way every time), is not retried: the run halts with
    ``non_retryable_error`` unless the step's ``retry_on`` names it. A ``TypeError``
    the step's own body raises stays an ordinary error, retried under the budget.

    Its message says where the value is and why it does not round-trip, e.g.
    ``"output of step 'load': bytes value b'x' does not round-trip through JSON"``.
    """


PayloadNotSerializable.__module__ = "ductline"


class StepSignatureError(DuctlineError, TypeError):
    """A step's arguments do not fit its signature: e.g. ``def f(a, b)`` that receives
    one input (every step after the first receives exactly one).

    Checked in the child (or thread, or event loop) that runs the attempt, by
    binding the arguments to the step's signature before it is called, so a
    ``TypeError`` raised inside the step's body is never taken for one. The
    attempt is recorded ``errored`` with ``error_type="ductline.StepSignatureError"``
    and, as the same input fails the same way, is not retried: the run halts with
    ``non_retryable_error`` unless the step's ``retry_on`` names it.

    Args:
        step: the step's name in its pipeline.
        expected: the signature it declares, e.g. ``"pair_sum(a, b)"``.
        got: what it was called with, e.g. ``"1 argument (int)"``.
        reason: why the arguments do not bind, from `inspect.Signature.bind`.
    """

    def __init__(self, step: str, expected: str, got: str, reason: str) -> None:
        self.step, self.expected, self.got, self.reason = step, expected, got, reason
        super().__init__(f"step {step!r} cannot take its arguments: it expects {expected} but got {got} "
                         f"({reason}); the first step receives the trigger's arguments, every other step "
                         "one input")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.step, self.expected, self.got, self.reason))


StepSignatureError.__module__ = "ductline"


class ExpandNotAList(DuctlineError, TypeError):
    """A step followed by ``expand`` returned something other than a list (a tuple,
    a dict, ``None``, ...): e.g. ``"step 'a' is followed by expand, so it must
    return a list, not int"``. A ``TypeError``, so code that catches ``TypeError``
    still catches it.

    Never raised in user code: the worker (or `ductline.execute`) checks the output
    after the step returned, records the attempt ``errored`` with
    ``error_type="ductline.ExpandNotAList"`` and, as the same input makes the same
    output, does not retry it: the run halts with ``non_retryable_error`` unless the
    step's ``retry_on`` names it (docs/howto/retries.md).
    """


ExpandNotAList.__module__ = "ductline"


class Retry(Exception):
    """Raised by a step to ask for another attempt after ``delay``.

    A requested retry is not a failure: it does not consume ``max_retry`` and is
    not subject to ``retry_on``/``no_retry_on``; the attempt is recorded
    ``errored`` with ``error_type="ductline.Retry"`` and the job waits ``delay``
    on the database clock. Bound a step that may ask forever with the run's
    ``timeout``. Raising it after `ductline.cross_boundary` halts the run with
    ``unsafe_to_retry`` like any other failure there.

    Args:
        delay: int seconds or a whole-second ``timedelta`` (default 0).
        reason: optional text recorded with the attempt.

    Raises:
        TypeError / ValueError: ``delay`` is not a valid duration.
    """

    def __init__(self, delay: object = 0, reason: str = "") -> None:
        from ductline.durations import to_seconds

        self.delay_seconds = to_seconds(delay, field="Retry delay")
        self.reason = str(reason)
        super().__init__(f"retry requested in {self.delay_seconds} s" + (f": {self.reason}" if self.reason else ""))


# Attempts record ``module.qualname`` of the raised type: make it the public name.
Retry.__module__ = "ductline"
