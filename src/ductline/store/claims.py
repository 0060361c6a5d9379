"""Which ready jobs a claim takes: the claim order, the starvation bound, and the
concurrency and rate limits of steps.

Order (`ductline.model.claim_order`): the highest priority first; at equal priority
the jobs of runs already under way before the first steps of new runs; then the
oldest not-before time. So that a steady stream of high-priority work (or of runs in
flight) cannot starve the rest, every `FIFO_EVERY`-th claim of a worker takes the
oldest ready jobs whatever their priority and phase: a ready job is passed over by at
most ``FIFO_EVERY - 1`` consecutive claims of any one worker once it is the oldest.
Claims read the ready index one (queue, priority, phase) range at a time, in
not-before order, and only the queues the worker serves (PostgreSQL in one
statement, SQLite one statement per range): jobs waiting in other queues are never
read, however many there are.

Limits are enforced where jobs are claimed, in the claim's transaction, so they hold
across every worker and host: candidates are read (locked with SKIP LOCKED on
PostgreSQL, not yet claimed), each limit key is locked in sorted order (an advisory
transaction lock on PostgreSQL; SQLite's single writer needs none), and

- a key already running ``concurrency`` attempts gets none: its candidates are
  *throttled* -- they leave the ready index until an attempt of the key ends and
  hands its slot on (`unthrottle`), so blocked jobs are not read again by every claim;
- a rate-limited key hands out start slots ``1/rate`` seconds apart (a generic cell
  rate algorithm): a candidate whose slot is in the future gets it as its not-before
  time and keeps it, and starts when it comes -- one row, no rescans, no bursts. The
  next free slot follows the last one a waiting job holds, so the slots of cancelled
  jobs are given out again.
- a job of a cancelled or expired run keeps its slot until its worker has killed the
  attempt (`release_slots`), so two attempts of a key never overlap.

A claim with a horizon (``horizon_ms``) also takes the jobs that become ready within
it, so that a worker can start a delayed job at its time with no claim on the path
(`ductline.runtime.horizon`). It reads the same ranges in the same order, through the
candidates below, and takes only jobs of steps without limits: their limits count
an attempt from its claim, and a rate slot handed out early would be used late.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

from ductline.model.claim_order import FIFO_EVERY
from ductline.store.records import StepLimit
from ductline.store.session import Session

__all__ = ["FIFO_EVERY", "MAX_ROUNDS", "claim_rows", "unthrottle"]

MAX_ROUNDS = 4  # candidate rounds per claim when some were throttled or deferred


def claim_rows(s: Session, *, per_level: bool, pipelines: list[str], limit: int, lease_ms: int,
               worker_id: str, limits: dict[tuple[str, str], StepLimit], fifo: bool,
               serving: dict[str, str | None], horizon_ms: int = 0) -> list[dict[str, Any]]:
    """Claim up to ``limit`` jobs; returns the claimed rows (``claim_jobs`` columns).

    Args:
        per_level: the dialect claims one queue (priority level and phase) per
            statement (SQLite).
        limits: ``{(pipeline, step): StepLimit}`` of the limited steps served.
        fifo: take the oldest ready jobs whatever their priority.
        serving: the ``:queues`` and ``:definitions`` served (`ductline.store.tx.served`).
        horizon_ms: take too the jobs that become ready within this many
            milliseconds, of steps without a limit only (a limit counts an attempt
            from its claim: one claimed early would take a slot it does not use yet).
            Their rows keep their not-before times; the worker starts them then.
    """
    base = {"pipelines": json.dumps(pipelines), "lease_ms": lease_ms, "worker_id": worker_id,
            "horizon_ms": horizon_ms, **serving}
    if per_level and not limits and not fifo and not horizon_ms:
        # The plain claim of a dialect without a fused one (PostgreSQL's is
        # claim_start_jobs, in `Tx`); anywhere else the candidate path below serves.
        rows: list[dict[str, Any]] = []
        for queue, level, phase in _queues(s, base):
            rows += s.fetch("claim_jobs", {**base, "limit": limit - len(rows), "queue": queue, "priority": level,
                                           "phase": phase})
            if len(rows) >= limit:
                break
        return rows
    claimed: list[dict[str, Any]] = []
    for _ in range(MAX_ROUNDS):
        candidates = _candidates(s, per_level, fifo, base, limit - len(claimed))
        if not candidates:
            break
        now = int(s.fetch("now")[0]["now_ms"])
        admitted, held_back = _admit(s, candidates, limits, now)
        if admitted:
            claimed += s.fetch("claim_by_ids", {**base, "ids": json.dumps(admitted), "now_ms": now})
        if not held_back or len(claimed) >= limit:
            break  # nothing was held back, so no more candidates are waiting behind
    return claimed


def _queues(s: Session, base: dict[str, Any]) -> list[tuple[str, int, int]]:
    """The ``(queue, priority, phase)`` ranges of the served queues holding ready
    jobs, in claim order."""
    return [(str(r["queue"]), int(r["priority"]), int(r["phase"]))
            for r in s.fetch("ready_queues", {"queues": base["queues"], "horizon_ms": base["horizon_ms"]})]


def _candidates(s: Session, per_level: bool, fifo: bool, base: dict[str, Any],
                limit: int) -> list[dict[str, Any]]:
    name = "claim_candidates_fifo" if fifo else "claim_candidates"
    if not per_level:
        return s.fetch(name, {**base, "limit": limit, "queue": "", "priority": 0, "phase": 0})
    found: list[dict[str, Any]] = []
    for queue, level, phase in _queues(s, base):
        where = {"queue": queue, "priority": level, "phase": phase}
        if fifo:  # the oldest of every queue, then the oldest of those
            found += s.fetch(name, {**base, "limit": limit, **where})
            continue
        found += s.fetch(name, {**base, "limit": limit - len(found), **where})
        if len(found) >= limit:
            break
    if fifo:
        found = sorted(found, key=lambda c: int(c["not_before_ms"]))[:limit]
    return found


def _admit(s: Session, candidates: list[dict[str, Any]],
           limits: dict[tuple[str, str], StepLimit], now: int) -> tuple[list[str], int]:
    """Decide the candidates; returns ``(ids to claim, how many were held back)``.

    A candidate whose step is not limited here (or that was created before its step
    had a limit, so it has no key) is admitted as is. The keys are locked, counted and
    their rate slots read in one statement each, however many keys there are.
    """
    admitted: list[str] = []
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in candidates:
        rule = limits.get((c["pipeline"], c["step"])) if c["limit_key"] is not None else None
        if rule is None:
            admitted.append(c["id"])
        else:
            by_key[c["limit_key"]].append(c)
    if not by_key:
        return admitted, 0
    keys = json.dumps(sorted(by_key))
    s.fetch("lock_limit_keys", {"keys": keys})
    running = {r["limit_key"]: int(r["n"]) for r in s.fetch("running_with_keys", {"keys": keys})}
    rules = {key: limits[(group[0]["pipeline"], group[0]["step"])] for key, group in by_key.items()}
    last_starts: dict[str, float] = {}
    reserved: dict[str, float] = {}
    if any(rule.rate is not None for rule in rules.values()):
        last_starts = {r["limit_key"]: float(r["last_start_ms"]) for r in s.fetch("rate_last_starts", {"keys": keys})}
        reserved = {r["limit_key"]: float(r["reserved_ms"]) for r in s.fetch("rate_reserved_slots", {"keys": keys})}
    held_back, throttle, saves, deferred, spare = 0, [], [], [], {}
    for key in sorted(by_key):
        group, rule = by_key[key], rules[key]
        if rule.concurrency is not None:
            room = max(0, rule.concurrency - running.get(key, 0))
            throttle += [c["id"] for c in group[room:]]
            held_back += len(group[room:])
            if room > len(group):
                # Slots nobody handed on (a limit raised by a deploy, a slot freed by
                # a cancel): throttled jobs of the key may take them now.
                spare[key] = room - len(group)
            group = group[:room]
        if rule.rate is not None and group:
            group, wait, last_start = _rate_slots(rule.rate, group, now, last_starts.get(key), reserved.get(key))
            deferred += wait
            saves.append({"limit_key": key, "last_start_ms": last_start})
            held_back += len(wait)
        admitted += [c["id"] for c in group]
    if throttle:
        s.execute("throttle_jobs", {"ids": json.dumps(throttle)})
    for key, n in spare.items():
        held_back += s.execute("unthrottle_next", {"limit_key": key, "n": n})
    if saves:
        s.execute_many("save_rate_last_start", saves)
    if deferred:
        s.execute_many("defer_jobs", deferred)
    return admitted, held_back


def _rate_slots(rate: float, group: list[dict[str, Any]], now: int, last_start: float | None,
                reserved: float | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
    """Give each candidate of a rate-limited key its start slot.

    Slots are handed out ``1/rate`` apart, after the last slot a waiting job holds
    (``reserved``), and kept by the jobs that wait for them. Whatever the slots say,
    two starts of a key are never closer than ``1/rate``: a slot missed (every worker
    busy) is taken late, never in a burst.

    Returns:
        ``(candidates that start now, deferrals {id, not_before_ms}, the last start)``.
    """
    interval = 1000.0 / rate
    last = float(now) - interval if last_start is None else last_start
    next_slot = float(now) if reserved is None else reserved + interval
    start_now: list[dict[str, Any]] = []
    deferred = []
    for c in group:
        held = c["rate_slot_ms"]
        if held is not None and int(held) <= now:
            want = float(now)  # it waited for this slot: it is its turn
        else:
            want = max(float(now), next_slot)
            next_slot = want + interval
        want = max(want, last + interval)
        if want <= now:
            start_now.append(c)
            last = float(now)
        else:
            deferred.append({"id": c["id"], "not_before_ms": math.ceil(want)})
            next_slot = max(next_slot, want + interval)
    return start_now, deferred, last


def unthrottle(s: Session, keys: list[str]) -> int:
    """Attempts of these limit keys ended (one entry per attempt): hand each freed
    slot to the next throttled job of its key (highest priority, then oldest);
    returns how many jobs became ready."""
    counts: dict[str, int] = defaultdict(int)
    for key in keys:
        counts[key] += 1
    s.fetch("lock_limit_keys", {"keys": json.dumps(sorted(counts))})
    return sum(s.execute("unthrottle_next", {"limit_key": key, "n": n}) for key, n in sorted(counts.items()))
