"""Starting a run: validate everything first, then write the run and its first job
in one transaction (a failed trigger writes nothing)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ductline import codec
from ductline.config import load_settings
from ductline.dsl.options import check_priority
from ductline.durations import optional_seconds
from ductline.errors import StoreError
from ductline.handle import RunHandle
from ductline.observability.events import EventName, emit
from ductline.runtime.advance import timeout_floor
from ductline.runtime.limits import limit_key
from ductline.store import payloads
from ductline.store.records import NewJob, NewRun
from ductline.stores import store_for

if TYPE_CHECKING:
    from ductline.dsl.pipeline import Pipeline


def _start_time(delay: Any, delay_until: Any, default_delay: int) -> tuple[int, int | None]:
    """``(delay_ms, absolute_not_before_ms)`` for the first job."""
    if delay is not None and delay_until is not None:
        raise ValueError("give delay or delay_until, not both")
    if delay_until is not None:
        if not isinstance(delay_until, datetime):
            raise TypeError(f"delay_until must be an aware datetime, not {type(delay_until).__name__}")
        if delay_until.tzinfo is None or delay_until.utcoffset() is None:
            raise ValueError(f"delay_until must be timezone-aware, got naive {delay_until!r}")
        return 0, int(delay_until.timestamp() * 1000)
    seconds = optional_seconds(delay, field="delay")
    return (default_delay if seconds is None else seconds) * 1000, None


MAX_KEY_LENGTH = 1000


def check_key(key: Any) -> str | None:
    """Validate an idempotency key: ``None`` or a non-empty ``str`` of at most
    `MAX_KEY_LENGTH` characters without NUL (PostgreSQL text cannot hold NUL).

    Raises:
        TypeError: not a ``str``.
        ValueError: empty, too long, or containing NUL.
    """
    if key is None:
        return None
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, not {type(key).__name__} ({key!r})")
    if not key or len(key) > MAX_KEY_LENGTH or "\x00" in key:
        raise ValueError(f"key must be 1 to {MAX_KEY_LENGTH} characters without NUL, got {key[:40]!r}")
    return key


def trigger_run(pipeline: "Pipeline", args: tuple[Any, ...], *, delay: Any, delay_until: Any,
                timeout: Any, database: Any, key: Any = None, priority: Any = None) -> RunHandle:
    """See `Pipeline.trigger`."""
    definition = pipeline.definition()
    key = check_key(key)
    run_priority = definition.priority if priority is None else check_priority(priority)
    encoded = codec.dumps(list(args), what="trigger arguments")
    timeout_seconds = optional_seconds(timeout, field="timeout", allow_zero=False)
    if timeout_seconds is None:
        timeout_seconds = definition.timeout
    start = definition.node(definition.start)
    delay_ms, not_before_ms = _start_time(delay, delay_until, start.options.delay)
    settings = load_settings()
    # Arguments above payload_max_bytes are refused before anything is written; above
    # payload_inline_bytes they are stored out of line with the run (the triggering
    # process's settings decide).
    limits = payloads.Limits.from_settings(settings)
    payloads.check_size(encoded, "trigger arguments", limits.max_bytes)
    stored_args, pending = payloads.prepare(encoded, limits)
    store = store_for(database)
    run_id = uuid.uuid4().hex
    existing: str | None = None
    with store.transaction() as tx:
        if not_before_ms is not None and not_before_ms <= tx.now_ms():
            raise ValueError("delay_until is in the past (by the database clock)")
        # A key held by an active run: the insert writes nothing (the unique index
        # decides, also against a trigger racing in another process) and that run's
        # handle is returned. The lookup after a refused insert can only miss if the
        # holder ended in between; then the key is free and the insert is retried.
        for _ in range(3):
            if tx.insert_run(NewRun(run_id, definition.name, stored_args, timeout_seconds, delay_ms,
                                    not_before_ms, key, run_priority)):
                break
            assert key is not None
            existing = tx.active_run_by_key(definition.name, key)
            if existing is not None:
                break
        else:  # pragma: no cover - the key flipped between held and free three times
            raise StoreError(f"could not trigger with key {key!r}: it is contended; try again")
        if existing is not None:
            return RunHandle(existing, store, created=False)
        if pending is not None:
            payloads.write(tx, run_id, pending, limits)
        tx.insert_jobs([NewJob(
            id=uuid.uuid4().hex, run_id=run_id, pipeline=definition.name, step=start.name, scope="",
            parent_scope=None, elem_index=None, status="pending", input=stored_args, delay_ms=delay_ms,
            not_before_ms=not_before_ms, max_retry=start.options.max_retry,
            max_crash=start.options.max_crash,
            retry_delay_seconds=settings.retry_delay if start.options.retry_delay is None
            else start.options.retry_delay,
            timeout_seconds=timeout_floor(start.options.timeout), priority=start.options.priority,
            limit_key=limit_key(definition.name, start.name, start.options, encoded),
        )])
    emit(EventName.PIPELINE_TRIGGERED, pipeline=definition.name, run_id=run_id)
    emit(EventName.JOB_ENQUEUED, pipeline=definition.name, step=start.name, run_id=run_id, count=1)
    return RunHandle(run_id, store)
