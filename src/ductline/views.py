"""Read models of runs for the CLI (and scripts): plain dicts, JSON-ready."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from decimal import Decimal
from uuid import UUID
from typing import Any

from ductline import codec
from ductline.timestamps import iso as iso  # the CLI's and the API's one form of a time
from ductline.errors import RunNotFound
from ductline.model import marking, outcomes, serving, stops
from ductline.model.states import WAITING_JOB, HaltReason, JobStatus, RunStatus
from ductline.store import Store, fleet, payloads, steplogs
from ductline.store import operator
from ductline.store import tags as run_tags


def shown_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """A run's metadata as the CLI and the API give it: each of its ``moves`` has
    ``at`` (`iso`) where it is stored with ``at_ms`` (epoch ms, kept as it is)."""
    moves = metadata.get("moves")
    if not isinstance(moves, list):
        return metadata
    return {**metadata, "moves": [_shown_move(m) for m in moves]}


def _shown_move(move: Any) -> Any:
    """One ``moves`` entry with ``at``; one whose ``at_ms`` is no time (metadata
    written by hand) is given as it is stored."""
    if not isinstance(move, dict) or isinstance(move.get("at_ms"), bool) or not isinstance(move.get("at_ms"), int):
        return move
    try:
        at = iso(move["at_ms"])
    except (OverflowError, ValueError, OSError):
        return move
    return {**{k: v for k, v in move.items() if k != "at_ms"}, "at": at}


def duration_ms(started_ms: int | None, finished_ms: int | None) -> int | None:
    """How long an attempt ran, in milliseconds; ``None`` while it runs."""
    if started_ms is None or finished_ms is None:
        return None
    return int(finished_ms) - int(started_ms)


def duration_text(ms: int | None) -> str:
    """A duration for people: ``"0.412 s"``, ``"2 min 5.000 s"``, ``"1 h 0 min 3.000 s"``;
    ``"running"`` for ``None``."""
    if ms is None:
        return "running"
    minutes, rest = divmod(ms, 60_000)
    hours, minutes = divmod(minutes, 60)
    seconds = f"{rest / 1000:.3f} s"
    if hours:
        return f"{hours} h {minutes} min {seconds}"
    return f"{minutes} min {seconds}" if minutes else seconds


def compact_time(ms: int | None, now: datetime | None = None) -> str:
    """A time for a narrow table, in the local time zone: ``"14:03:12"`` today,
    ``"Mar 02 14:03"`` earlier this year, ``"2025-03-02"`` before; ``""`` for ``None``.
    (`iso` gives the full UTC form.)"""
    if ms is None:
        return ""
    at = datetime.fromtimestamp(ms / 1000).astimezone()
    now = (now or datetime.now()).astimezone()
    if at.date() == now.date():
        return at.strftime("%H:%M:%S")
    if at.year == now.year:
        return f"{_MONTHS[at.month - 1]} {at.day:02d} {at:%H:%M}"
    return at.strftime("%Y-%m-%d")


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def compact_duration(ms: int | None) -> str:
    """A duration for a narrow table: ``"0.412 s"``, ``"12.3 s"``, ``"2 min 5 s"``,
    ``"1 h 2 min"``, ``"3 d 4 h"``; ``""`` for ``None``. (`duration_text` gives it
    to the millisecond.)"""
    if ms is None:
        return ""
    if ms < 10_000:
        return f"{ms / 1000:.3f} s"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    seconds = ms // 1000
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    days, hour = divmod(hours, 24)
    if days:
        return f"{days} d {hour} h"
    return f"{hours} h {minute} min" if hours else f"{minutes} min {second} s"


def run_summary(row: dict[str, Any], reason: str | None) -> dict[str, Any]:
    """A run row (``list_runs``) as ``ductline runs --json`` and ``GET /api/runs``
    give it.

    ``finished_at`` is null for a halted run: it has not ended (`ductline retry`
    revives it). ``reason`` is why the run stopped, as `run_reasons` decides it."""
    halted = row["status"] == RunStatus.HALTED
    return {"run_id": row["id"], "pipeline": row["pipeline"], "status": row["status"],
            "halt_reason": row["halt_reason"], "reason": reason,
            "created_at": iso(row["created_ms"]), "finished_at": None if halted else iso(row["finished_ms"]),
            "definition": row["definition"]}


def retry_hint(halt_reason: str | None, run_id: str, deadline: str | None = None) -> str:
    """What to do about a halted run, as ``show`` and ``run`` say it. A step whose
    error is not retried (``non_retryable_error``: its type is in ``no_retry_on``, or
    the error is deterministic, such as `ductline.PayloadNotSerializable`) fails the
    same way on the same input: its code must change before a retry can help.

    ``deadline``: the run's deadline (ISO 8601 UTC, as `run_view` gives it) or
    ``None``. A halted run is bound by it too: past it the run ends ``failed`` and
    can no longer be retried, so the hint says by when."""
    until = f", until its run deadline at {utc_clock(deadline)} (then the run fails)" if deadline else ""
    if halt_reason == HaltReason.NON_RETRYABLE_ERROR:
        return (f"its step's error is not retried, and the same input fails the same way: change the step's code "
                f"(and restart the workers with it), then `ductline retry {run_id}` revives the run{until}")
    return f"`ductline retry {run_id}` revives it from its failed step(s){until}"


def utc_clock(at: str, now: datetime | None = None) -> str:
    """An ISO 8601 time (``2030-01-02T09:04:05.120Z``) as a person reads it in a
    sentence: ``"09:04:05 UTC"`` today (UTC), ``"2030-01-02 09:04:05 UTC"`` another day."""
    moment = datetime.fromisoformat(at.replace("Z", "+00:00")).astimezone(timezone.utc)
    today = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).date()
    return f"{moment:%H:%M:%S} UTC" if moment.date() == today else f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def run_reasons(store: Store, rows: list[dict[str, Any]]) -> dict[str, str]:
    """Why each run of ``rows`` (``list_runs`` rows) stopped, by run id: the one rule
    for the reason ``ductline runs``, ``GET /api/runs`` and the dashboard's runs and
    "Needs attention" tables show.

    A run with a halt reason gives it (``job_retries_exhausted``, ``pause_expired``,
    ...); a failed or cancelled run without one gives the error its ending recorded
    (e.g. "the run exceeded its deadline of 4 s"), read for all of them in one query.
    Runs with neither (active, completed, cancelled by an operator) are left out.

    Raises:
        StoreError: the database failed.
    """
    found = {r["id"]: str(r["halt_reason"]) for r in rows if r["halt_reason"]}
    wanted = [r["id"] for r in rows if r["status"] in (RunStatus.FAILED, RunStatus.CANCELLED)
              and not r["halt_reason"]]
    for run_id, run in store.run_ends(wanted).items():
        try:
            metadata = json.loads(run.get("metadata") or "{}")
        except (TypeError, ValueError):
            continue
        error = metadata.get("error") if isinstance(metadata, dict) else None
        if isinstance(error, str) and error:
            found[run_id] = error
    return found


def in_run_order(jobs: list[dict[str, Any]], attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's step runs (``run_jobs`` rows) in the order `ductline show`, the JSON
    API and the dashboard list them: the step runs one transition created together
    (an expand's elements: one step at one enclosing scope) stay together, in element
    order; such groups follow each other as they were created, ties (fast hops, a
    divide's branches) by the first attempt's start, then by step name.

    Within a group the instant each row was inserted does not count: a worker with
    free slots takes an expand's first elements as they are created and inserts them
    after the rest, a millisecond or more later.

    Args:
        jobs: rows with ``id``, ``step``, ``scope``, ``parent_scope``, ``created_ms``.
        attempts: rows with ``job_id`` and ``started_ms`` (epoch ms).
    """
    started: dict[str, int] = {}
    for a in attempts:
        started[a["job_id"]] = min(started.get(a["job_id"], a["started_ms"]), a["started_ms"])
    created: dict[tuple[str, str | None], int] = {}
    first_start: dict[tuple[str, str | None], float] = {}
    for j in jobs:
        group = (j["step"], j["parent_scope"])
        created[group] = min(created.get(group, j["created_ms"]), j["created_ms"])
        first_start[group] = min(first_start.get(group, float("inf")), started.get(j["id"], float("inf")))

    def key(j: dict[str, Any]) -> tuple[Any, ...]:
        # Within a group the element index alone orders (the scope is the enclosing
        # one plus it); the scope's text is never parsed: a view shows whatever is stored.
        group = (j["step"], j["parent_scope"])
        return (created[group], first_start[group], j["step"], j["parent_scope"] or "",
                -1 if j["elem_index"] is None else j["elem_index"], j["scope"] or "")

    return sorted(jobs, key=key)


def unserved_waits(view: dict[str, Any]) -> list[str]:
    """``"step chatty waits: no live worker has step 'chatty' of definition ab74216a"``:
    one line per pending step run of a `run_view` that no live worker can claim, as
    ``ductline show`` prints them and `ductline.RunHandle.wait` adds them to its
    ``TimeoutError``."""
    lines = []
    for s in view["steps"]:
        if s["unserved"]:
            where = s["step"] + ("" if s["index"] is None else f"[{s['index']}]")
            lines.append(f"step {where} waits: {s['unserved']}")
    return lines


def run_view(store: Store, run_id: str, *, live_within_seconds: float = serving.LIVE_WITHIN_SECONDS) -> dict[str, Any]:
    """The run as ``ductline show --json`` prints it.

    A pending step no live worker can claim (none serves its queue, or none loaded
    its run's definition) says why in ``unserved`` (`ductline.model.serving`); a
    worker is live while it heartbeats within ``live_within_seconds``. A step run an
    operator marked succeeded has ``marked``: ``actor``, ``at`` and ``reason`` (its
    attempts keep their errors; ``None`` for a step run nobody marked).

    Raises:
        RunNotFound: no such run.
    """
    run_id = resolve_run_id(store, run_id)
    run = store.get_run(run_id)
    if run is None:
        raise RunNotFound(f"run {run_id!r} not found")
    attempts: dict[str, list[dict[str, Any]]] = {}
    attempt_rows = store.run_attempts(run_id)
    logs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for record in steplogs.of_run(store.dialect, run_id):
        logs.setdefault((record.job_id, record.attempt), []).append(log_entry(record))
    for a in attempt_rows:
        attempts.setdefault(a["job_id"], []).append({
            "attempt": a["attempt"], "result": outcomes.shown_result(a["result"], a["error_type"]),
            "started_at": iso(a["started_ms"]),
            "finished_at": iso(a["finished_ms"]), "duration_ms": duration_ms(a["started_ms"], a["finished_ms"]),
            "deadline": iso(a["deadline_ms"]),
            "error_type": a["error_type"], "error": a["error"], "traceback": a["traceback"],
            # what the attempt logged and printed (ductline.execution.steplog), oldest first
            "logs": logs.get((a["job_id"], int(a["attempt"])), []),
        })
    steps = []
    jobs = in_run_order(store.run_jobs(run_id), attempt_rows)
    offers = fleet.live_offers(store, live_within_seconds) if any(j["status"] == JobStatus.PENDING for j in jobs) \
        else []
    actions = operator.actions_of_run(store.dialect, run_id)
    marks = marks_by_job(actions)
    for job in jobs:
        status = JobStatus(job["status"])
        waiting = status is JobStatus.PENDING and not job["throttled"]
        steps.append({
            "step": job["step"], "index": job["elem_index"], "scope": job["scope"], "status": status.value,
            "not_before": iso(job["not_before_ms"]) if status in WAITING_JOB else None,
            "boundary": job["boundary"], "skip_reason": stops.shown_skip_reason(status, job["skip_reason"],
                                                                            job["attempts"]),
            # the step run whose stop made this one unreachable (null: skipped itself)
            "skip_root": job["skip_root"],
            # a paused step waits for `ductline resume`; null: the pause never expires
            "pause_expires": iso(job.get("pause_expires_ms")) if status is JobStatus.PAUSED else None,
            # a deferred step waits for this event (`ductline send`); null: not waiting, or no timeout
            "waiting_for": job.get("wait_event") if status is JobStatus.DEFERRED else None,
            "wait_expires": iso(job.get("pause_expires_ms")) if status is JobStatus.DEFERRED else None,
            "priority": job["priority"], "limit_key": job["limit_key"],
            # pending but waiting for a slot of its concurrency limit (not claimable)
            "throttled": bool(job["throttled"]) and status is JobStatus.PENDING,
            "queue": job["queue"],
            # pending, and no live worker can claim it: why (null: one can, or it is not pending)
            "unserved": serving.unserved(job["step"], job["queue"], job["definition"], offers) if waiting else None,
            "marked": marks.get(job["id"]) if status is JobStatus.COMPLETED else None,  # see marks_by_job
            "attempts": attempts.get(job["id"], []),
        })
    return {
        "run_id": run["id"], "pipeline": run["pipeline"], "status": run["status"],
        "halt_reason": run["halt_reason"], "key": run.get("idempotency_key"), "priority": run["priority"],
        "tags": run_tags.of_run(store.dialect, run_id),
        # the fingerprint of the definition the run follows ("": started before versions)
        "definition": run["definition"],
        "metadata": shown_metadata(json.loads(run["metadata"] or "{}")),
        # Out-of-line arguments and output (ductline.store.payloads) are read back in full.
        # Enums, dataclasses and models stay their tagged JSON: readers import no user code.
        "args": codec.loads(payloads.load(store, run_id, run["args"]), user_types=False),
        "output": codec.loads(payloads.load(store, run_id, run["output"]), user_types=False),
        "not_before": iso(run["not_before_ms"]), "deadline": iso(run["deadline_ms"]),
        "created_at": iso(run["created_ms"]), "started_at": iso(run["started_ms"]),
        "finished_at": iso(run["finished_ms"]), "steps": steps,
        "events": event_views(store, run_id, {j["id"]: j["step"] for j in jobs}),
        "operator_actions": operator_actions(store, run_id, actions, jobs),
        **run_family(store, run_id),
    }


def run_family(store: Store, run_id: str, limit: int = 1000) -> dict[str, Any]:
    """``parent``: the run that started this one as a child run (``run_id``,
    ``pipeline``, ``step``, ``index``) or ``None``; ``children``: the child runs this
    run's steps started (``run_id``, ``pipeline``, ``status``, ``step``, ``index``,
    ``created_at``, ``finished_at``), in the order they were started, at most ``limit``."""
    from ductline.store import children as child_rows

    with store.dialect.reader() as s:
        parent = child_rows.parent_of(s, run_id)
        found = child_rows.child_runs(s, run_id, limit)
    return {
        "parent": None if parent is None else {
            "run_id": parent["parent_run_id"], "pipeline": parent["parent_pipeline"], "step": parent["parent_step"],
            "index": parent["child_index"]},
        "children": [{"run_id": c["id"], "pipeline": c["pipeline"], "status": c["status"], "step": c["parent_step"],
                      "index": c["child_index"], "created_at": iso(c["created_ms"]),
                      "finished_at": iso(c["finished_ms"])} for c in found],
    }


def event_views(store: Store, run_id: str, steps: dict[str, str]) -> list[dict[str, Any]]:
    """The events sent to a run, oldest first: ``name``, ``key``, ``data`` (as
    structure: no user type is built), ``sent_at``, and ``consumed_by`` (the step
    whose wait consumed it; null while it is kept) with ``consumed_at``."""
    return [{
        "id": e["id"], "name": e["name"], "key": e["key"],
        "data": codec.loads(e["data"], user_types=False), "sent_at": iso(e["sent_ms"]),
        "consumed_by": steps.get(e["job_id"]) if e["job_id"] is not None else None,
        "consumed_at": iso(e["consumed_ms"]),
    } for e in store.run_events(run_id)]


def marks_by_job(actions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Who marked each step run succeeded (``actor``, ``at``, ``reason``), by job id,
    from a run's operator action rows. A marked step run is completed for good (never
    re-run, never marked again): its mark, not its last attempt's error, is how it
    ended; a step view shows it as ``marked`` while the step run is completed."""
    return {a["job_id"]: {"actor": a["actor"], "at": iso(a["at_ms"]), "reason": a["reason"]}
            for a in actions if a["action"] == marking.ACTION}


def operator_actions(store: Store, run_id: str, actions: list[dict[str, Any]] | None = None,
                     jobs: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The run's operator actions, oldest first: who marked which step run succeeded,
    when, why, with which output (as `ductline show` shows values) and what it was.
    ``actions`` and ``jobs``: the run's rows, when the caller read them already."""
    by_job = {j["id"]: j["elem_index"] for j in (store.run_jobs(run_id) if jobs is None else jobs)}
    return [{"action": a["action"], "step": a["step"], "index": by_job.get(a["job_id"]), "scope": a["scope"],
             "actor": a["actor"], "reason": a["reason"], "at": iso(a["at_ms"]),
             "previous_status": a["previous_status"],
             "output": codec.loads(payloads.load(store, run_id, a["output"]), user_types=False)}
            for a in (operator.actions_of_run(store.dialect, run_id) if actions is None else actions)]


HALT_HANDLER = "__on_halt__"  # the step of a pipeline's on_halt handler


def failed_steps(view: dict[str, Any]) -> list[str]:
    """Why a halted run halted, for people: one line per failed step run that
    stopped it, naming it, its attempts and its last error (from `run_view`), with
    where that error was raised: the last frames of its attempt's traceback
    (`ductline.frames.where_stored`), e.g. ``" (at bug.py:4 in helper)"``.

    The step the run recorded as its ``halted_step`` comes first (all its failed
    step runs, for an expanded step); then any other failed step run but the
    ``on_halt`` handler's. Step text is returned as stored: escape it before it
    reaches a terminal (`ductline.safetext`).
    """
    halted = (view.get("metadata") or {}).get("halted_step")
    failed = [s for s in view["steps"] if s["status"] == JobStatus.FAILED and s["step"] != HALT_HANDLER]
    failed.sort(key=lambda s: s["step"] != halted)  # stable: the rest keep their order
    from ductline.frames import where_stored

    lines = []
    for s in failed:
        where = s["step"] + ("" if s["index"] is None else f"[{s['index']}]")
        attempts = s["attempts"]
        count = f"{len(attempts)} attempt{'' if len(attempts) == 1 else 's'}"
        last = attempts[-1] if attempts else {}
        error = f": {last['error_type']}: {last['error']}" if last.get("error_type") else ""
        error += where_stored(last.get("traceback")) if error else ""
        boundary = f" (after crossing its boundary: {s['boundary']})" if s.get("boundary") else ""
        lines.append(f"step {where} failed after {count}{boundary}{error}")
    return lines


def log_entry(record: steplogs.StepLogRecord) -> dict[str, Any]:
    """One step log record as ``show --json``, the API and ``ductline logs --json`` give it."""
    return {"at": iso(record.at_ms), "level": record.level, "logger": record.logger, "message": record.message}


def to_json(value: Any) -> str:
    """JSON for people and scripts: aware datetimes in outputs become ISO 8601 text."""
    return json.dumps(value, default=_default)


def _default(value: Any) -> Any:
    """Decoded richer values as JSON for people: dates as ISO 8601, UUIDs and
    decimals as their text (tuples are written as lists by `json`)."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (UUID, Decimal)):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


RUN_ID_LENGTH = 32  # every run id is a uuid4 in hex (`ductline.operations.trigger`)
MIN_PREFIX = 6      # the shortest prefix `resolve_run_id` takes
SHORT_ID_LENGTH = 8  # the shortest prefix `short_ids` gives


def short_ids(store: Store, run_ids: list[str], minimum: int = SHORT_ID_LENGTH) -> dict[str, str]:
    """The shortest prefix of every id in ``run_ids`` that names only that run in
    ``store`` (so `resolve_run_id` takes it), all of one length, at least
    ``minimum`` characters: what a narrow table shows and a person pastes.

    One index range scan per id (`Store.runs_with_prefix`) proves each prefix
    unique among all runs, not only those listed.
    """
    if not run_ids:
        return {}
    ids = sorted(set(run_ids))
    length = max(minimum, MIN_PREFIX)
    # Unique among the listed ids first: one more character than the longest
    # prefix two neighbours in sorted order share.
    for left, right in zip(ids, ids[1:]):
        length = max(length, _shared(left, right) + 1)
    for run_id in ids:
        while length < len(run_id):
            others = [m for m in store.runs_with_prefix(run_id[:length]) if m != run_id]
            if not others:
                break
            length = max(length, max(_shared(run_id, other) for other in others) + 1)
    return {run_id: run_id[:length] for run_id in run_ids}


def _shared(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def run_steps(store: Store, run: dict[str, Any]) -> list[str] | None:
    """The steps a run has: those of its definition when a worker recorded it, else
    (a settled run) the steps it reached; ``None`` when that cannot be known (an
    unsettled run of an unrecorded definition may still reach steps it has not).

    Args:
        run: the run's row (`Store.get_run`).
    """
    from ductline.errors import DefinitionNotFound
    from ductline.model.states import SETTLED_RUN, RunStatus

    if run.get("definition"):
        try:
            return fleet.definition(store, run["definition"]).steps
        except (DefinitionNotFound, ValueError):
            pass
    if RunStatus(run["status"]) not in SETTLED_RUN:
        return None
    return list(dict.fromkeys(job["step"] for job in store.run_jobs(run["id"])))


def resolve_run_id(store: Store, text: str) -> str:
    """A full run id, or a unique prefix of one (at least 6 characters).

    Raises:
        RunNotFound: no run, or several runs, start with it.
    """
    if store.get_run(text) is not None or len(text) >= RUN_ID_LENGTH:
        return text
    if len(text) < MIN_PREFIX:
        raise RunNotFound(f"run {text!r} not found (a prefix of a run id needs at least {MIN_PREFIX} characters)")
    matches = store.runs_with_prefix(text)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotFound(f"run {text!r} not found")
    raise RunNotFound(f"{text!r} matches several runs: {', '.join(m[:12] for m in matches)}; give more characters")

