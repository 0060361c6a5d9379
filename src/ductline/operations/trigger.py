"""Starting runs: validate and encode everything first (`prepare`, no I/O), then
write each run and its first job (`insert`) -- one statement per trigger on
PostgreSQL (its own transaction; one transaction on SQLite, or when an argument is
stored out of line), one transaction per call for `trigger_many` (one statement per
chunk of runs), so a failed trigger writes nothing.

Arguments the first step cannot take are refused here, before anything is written,
by the rule its attempt would apply (`check_start_arguments`): a run that could only
halt at its first attempt is never started."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable

from ductline import codec
from ductline.config import load_settings
from ductline.dsl.options import check_priority
from ductline.dsl.steps import check_arguments
from ductline.durations import optional_seconds
from ductline.engine.start import new_run
from ductline.errors import StoreError
from ductline.observability.events import EventName, emit
from ductline.model.routing import JobSpec, job_spec
from ductline.model.tags import Tags, check_tags
from ductline.store import tags as run_tags
from ductline.store import payloads
from ductline.model.states import JobStatus
from ductline.store.records import NewJob, NewRun
from ductline.dsl.graph import Definition, is_unicode
from ductline.store.tx import Tx
from ductline.stores import store_for

if TYPE_CHECKING:
    from ductline.store import Store


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


def check_start_arguments(definition: Definition, args: tuple[Any, ...]) -> None:
    """Refuse trigger arguments that do not bind to the first step's signature.

    The rule is the one the step's attempt applies before calling it
    (`ductline.dsl.steps.check_arguments`): a function or ``async def`` is bound
    by its own signature, a `ductline.Step` subclass by its constructor's (the base
    class takes any arguments). A callable whose signature cannot be read is let
    through, as its attempt lets it through to the call.

    Raises:
        StepSignatureError: a `TypeError` naming the step, the signature it
            declares and the arguments given.
    """
    start = definition.node(definition.start)
    check_arguments(start.func, args, start.name)


# The first job's spec by definition (its identity) and default retry delay: a
# trigger computes it once per definition, not once per run. It depends on the
# arguments only through a concurrency key read from them, which is never cached.
_FIRST_SPECS: dict[int, tuple[Definition, float, JobSpec]] = {}
_FIRST_SPECS_MAX = 256  # definitions; past this the cache starts again empty


def first_job_spec(definition: Definition, encoded_args: str, retry_delay: float) -> JobSpec:
    """The `JobSpec` of a new run's first job: ``job_spec(definition,
    definition.start, "", encoded_args, retry_delay)``, computed once per definition
    and ``retry_delay`` (seconds) unless the start step's concurrency key is read from
    the arguments (``encoded_args``, their JSON list)."""
    start = definition.node(definition.start)
    if start.options.concurrency_key is not None:
        return job_spec(definition, start.name, "", encoded_args, retry_delay)
    cached = _FIRST_SPECS.get(id(definition))
    if cached is not None and cached[0] is definition and cached[1] == retry_delay:
        return cached[2]
    spec = job_spec(definition, start.name, "", encoded_args, retry_delay)
    if len(_FIRST_SPECS) >= _FIRST_SPECS_MAX:
        _FIRST_SPECS.clear()
    _FIRST_SPECS[id(definition)] = (definition, retry_delay, spec)
    return spec


# The payload limits of the settings last read: `load_settings` gives the same object
# while nothing it reads changed, so a trigger builds them once, not once per call.
_LIMITS: tuple[object, payloads.Limits] = (None, payloads.DEFAULT_LIMITS)


def _limits(settings: Any) -> payloads.Limits:
    global _LIMITS
    if _LIMITS[0] is not settings:
        _LIMITS = (settings, payloads.Limits.from_settings(settings))
    return _LIMITS[1]


MAX_KEY_LENGTH = 1000


def check_key(key: Any) -> str | None:
    """Validate an idempotency key: ``None`` or a non-empty ``str`` of at most
    `MAX_KEY_LENGTH` characters without NUL (PostgreSQL text cannot hold NUL) or
    lone surrogates (`ductline.dsl.graph.is_unicode`: the store keeps one as its
    escape, so ``"k\\ud800"`` and the text ``"k\\\\ud800"`` would be the same key).

    Raises:
        TypeError: not a ``str``.
        ValueError: empty, too long, or containing NUL or a lone surrogate.
    """
    if key is None:
        return None
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, not {type(key).__name__} ({key!r})")
    flaw = " with a NUL" if "\x00" in key else "" if is_unicode(key) else " with a lone surrogate"
    if not key or len(key) > MAX_KEY_LENGTH or flaw:
        raise ValueError(f"key must be 1 to {MAX_KEY_LENGTH} characters without NUL or lone surrogates, "
                         f"got {len(key)} character{'s' if len(key) != 1 else ''}{flaw}")
    return key


@dataclass(frozen=True, slots=True)
class Prepared:
    """A run ready to be written: validated and encoded, nothing written yet."""

    definition: Definition
    run: NewRun
    job: NewJob
    pending: "payloads.Pending | None"   # arguments to store out of line with the run
    limits: payloads.Limits
    tags: Tags = ()                      # written with the run (`ductline.model.tags`)


@dataclass(frozen=True, slots=True)
class Triggered:
    """A triggered run: its id, and ``created=False`` when an active run already
    held the idempotency key (its id is returned instead)."""

    run_id: str
    created: bool = True


def prepare(definition: Definition, args: tuple[Any, ...], *, delay: Any = None, delay_until: Any = None,
            timeout: Any = None, key: Any = None, priority: Any = None,
            limits: payloads.Limits | None = None, retry_delay: int | None = None,
            encoded_args: str | None = None, tags: Any = None) -> Prepared:
    """Validate and encode one run of ``definition`` (see `ductline.Pipeline.trigger`).

    Args:
        encoded_args: the arguments already encoded (a JSON list the codec wrote, e.g.
            a schedule's stored arguments); ``args`` is then their structure
            (`ductline.codec.structure`), checked against the first step's signature
            without building any value of a user type.

    Raises:
        TypeError, ValueError, PayloadTooLarge: as `ductline.Pipeline.trigger` says;
            `ductline.StepSignatureError` (a ``TypeError``) for arguments the first step
            cannot take (`check_start_arguments`); tags past their limits
            (`ductline.model.tags.check_tags`).
    """
    key = check_key(key)
    checked_tags = check_tags(tags)
    run_priority = definition.priority if priority is None else check_priority(priority)
    encoded = encoded_args if encoded_args is not None else codec.dumps(list(args), what="trigger arguments")
    timeout_seconds = optional_seconds(timeout, field="timeout", allow_zero=False)
    if timeout_seconds is None:
        timeout_seconds = definition.timeout
    start = definition.node(definition.start)
    delay_ms, not_before_ms = _start_time(delay, delay_until, start.options.delay)
    check_start_arguments(definition, args)
    if limits is None or retry_delay is None:
        settings = load_settings()
        limits = limits or _limits(settings)
        retry_delay = settings.retry_delay if retry_delay is None else retry_delay
    # Arguments above payload_max_bytes are refused before anything is written; above
    # payload_inline_bytes they are stored out of line with the run (the triggering
    # process's settings decide).
    payloads.check_size(encoded, "trigger arguments", limits.max_bytes)
    ids = os.urandom(32).hex()  # the run's id and its first job's: one read of the system's randomness
    rows = new_run(definition, ids[:32], encoded, timeout_seconds=timeout_seconds, delay_ms=delay_ms,
                   not_before_ms=not_before_ms, retry_delay=retry_delay, limits=limits, key=key,
                   priority=run_priority, job_id=ids[32:],
                   spec=first_job_spec(definition, encoded, retry_delay))
    return Prepared(definition, rows.run, rows.job, rows.pending, limits, checked_tags)


def prepare_many(definition: Definition, args_list: Iterable[Any], *, delay: Any = None,
                 delay_until: Any = None, timeout: Any = None, priority: Any = None,
                 tags: Any = None) -> list[Prepared]:
    """Validate and encode many runs of ``definition`` that share their options
    (see `ductline.Pipeline.trigger_many`); nothing is written.

    Raises:
        TypeError, ValueError, PayloadTooLarge: as `ductline.Pipeline.trigger_many`
            says; an element's error names its index (arguments the first step
            cannot take among them, `check_start_arguments`).
    """
    if isinstance(args_list, (str, bytes, dict)) or not isinstance(args_list, Iterable):
        raise TypeError(f"args_list must be a list (or other iterable) of arguments, not "
                        f"{type(args_list).__name__}")
    run_priority = definition.priority if priority is None else check_priority(priority)
    checked_tags = check_tags(tags)
    timeout_seconds = optional_seconds(timeout, field="timeout", allow_zero=False)
    if timeout_seconds is None:
        timeout_seconds = definition.timeout
    start = definition.node(definition.start)
    delay_ms, not_before_ms = _start_time(delay, delay_until, start.options.delay)
    settings = load_settings()
    limits = payloads.Limits.from_settings(settings)
    elements = list(args_list)
    # Fresh random ids for every run and job from one read of the system's randomness
    # (as random as uuid4's, without a system call per id).
    ids = os.urandom(32 * len(elements)).hex()
    prepared = []
    for index, element in enumerate(elements):
        args = element if isinstance(element, tuple) else (element,)
        what = f"trigger_many element {index} (its arguments)"
        encoded = codec.dumps(list(args), what=what)
        try:
            check_start_arguments(definition, args)
        except TypeError as exc:
            raise TypeError(f"{what}: {exc}") from exc
        payloads.check_size(encoded, what, limits.max_bytes)
        stored_args, pending = payloads.prepare(encoded, limits)
        run_id, job_id = ids[64 * index:64 * index + 32], ids[64 * index + 32:64 * index + 64]
        spec = first_job_spec(definition, encoded, settings.retry_delay)
        prepared.append(Prepared(
            definition,
            NewRun(run_id, definition.name, stored_args, timeout_seconds, delay_ms, not_before_ms, None,
                   run_priority, definition.fingerprint),
            NewJob.of(run_id, definition.name, start.name, "", stored_args, spec, status=JobStatus.PENDING.value,
                      delay_ms=delay_ms, not_before_ms=not_before_ms, job_id=job_id),
            pending, limits, checked_tags))
    return prepared


def insert_many(tx: Tx, prepared: list[Prepared]) -> list[Triggered]:
    """Write prepared runs (without idempotency keys) and their first jobs inside
    ``tx``: one statement for the runs and one for the jobs per `INSERT_CHUNK` rows.

    Raises:
        ValueError: their ``delay_until`` is in the past by the database clock.
        StoreError: the database refused a row (e.g. a run id that exists).
    """
    if not prepared:
        return []
    first = prepared[0].run
    if first.not_before_ms is not None and first.not_before_ms <= tx.now_ms():
        raise ValueError("delay_until is in the past (by the database clock)")
    runs = [p.run for p in prepared]
    inserted = tx.insert_runs(runs)
    if inserted != len(runs):  # pragma: no cover - ids are fresh uuids; the caller rolls back
        raise StoreError(f"trigger_many inserted {inserted} of {len(runs)} runs")
    for p in prepared:
        if p.pending is not None:
            payloads.write(tx, p.run.id, p.pending, p.limits)
    tx.insert_jobs([p.job for p in prepared])
    run_tags.write_many(tx, [(p.run.id, p.tags) for p in prepared])
    return [Triggered(run.id) for run in runs]


def insert(tx: Tx, prepared: Prepared) -> Triggered:
    """Write a prepared run and its first job inside ``tx``.

    Raises:
        ValueError: its ``delay_until`` is in the past by the database clock.
        StoreError: its idempotency key stayed contended.
    """
    run = prepared.run
    if run.not_before_ms is not None and run.not_before_ms <= tx.now_ms():
        raise ValueError("delay_until is in the past (by the database clock)")
    # A key held by an active run: the insert writes nothing (the unique index
    # decides, also against a trigger racing in another process) and that run's
    # id is returned. The lookup after a refused insert can only miss if the
    # holder ended in between; then the key is free and the insert is retried.
    for _ in range(3):
        if tx.insert_run_with_job(run, prepared.job):
            break
        assert run.idempotency_key is not None
        existing = tx.active_run_by_key(run.pipeline, run.idempotency_key)
        if existing is not None:
            return Triggered(existing, created=False)
    else:  # pragma: no cover - the key flipped between held and free three times
        raise StoreError(f"could not trigger with key {run.idempotency_key!r}: it is contended; try again")
    if prepared.pending is not None:
        payloads.write(tx, run.id, prepared.pending, prepared.limits)
    run_tags.write(tx, run.id, prepared.tags)
    return Triggered(run.id)


def announce(prepared: Prepared, triggered: Triggered) -> None:
    """Emit the events of a run that was written (after its commit)."""
    if triggered.created:
        name = prepared.definition.name
        emit(EventName.PIPELINE_TRIGGERED, pipeline=name, run_id=triggered.run_id)
        emit(EventName.JOB_ENQUEUED, pipeline=name, step=prepared.job.step, run_id=triggered.run_id, count=1)


def trigger_run(definition: Definition, args: tuple[Any, ...], *, database: Any = None, delay: Any = None,
                delay_until: Any = None, timeout: Any = None, key: Any = None,
                priority: Any = None, tags: Any = None) -> tuple["Store", Triggered]:
    """Start one run in its own transaction (see `ductline.Pipeline.trigger`).

    Returns:
        The store written to and the `Triggered` run.
    """
    prepared = prepare(definition, args, delay=delay, delay_until=delay_until, timeout=timeout, key=key,
                       priority=priority, tags=tags)
    store = store_for(database)
    # The run, its first job and the wake-up are one statement (`Tx.insert_run_with_job`):
    # it commits alone, without the round trips of BEGIN and COMMIT. A held key's lookup
    # after it, and the check of `delay_until` before it, need no transaction: each reads
    # what is committed, as it would inside one. An argument stored out of line has its
    # payload written with the run, in one transaction; so are its tags.
    whole = prepared.pending is None and not prepared.tags
    with store.statementwise() if whole else store.transaction() as tx:
        triggered = insert(tx, prepared)
    announce(prepared, triggered)
    return store, triggered


def trigger_runs(definition: Definition, args_list: Iterable[Any], *, database: Any = None, delay: Any = None,
                 delay_until: Any = None, timeout: Any = None,
                 priority: Any = None, tags: Any = None) -> tuple["Store", list[Triggered]]:
    """Start many runs in one transaction, all or nothing (see
    `ductline.Pipeline.trigger_many`).

    Returns:
        The store written to and the `Triggered` runs, in the order of ``args_list``.
    """
    prepared = prepare_many(definition, args_list, delay=delay, delay_until=delay_until, timeout=timeout,
                            priority=priority, tags=tags)
    store = store_for(database)
    if not prepared:
        return store, []
    with store.transaction() as tx:
        triggered = insert_many(tx, prepared)
    for p, t in zip(prepared, triggered):
        announce(p, t)
    return store, triggered
