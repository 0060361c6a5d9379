"""`Store`: the one place that reads and writes ductline's tables.

Its verbs are the state transitions of runs, jobs and attempts. Every verb that
ends or moves an attempt is conditional on the attempt's lease token (fencing): if
zero rows change, the lease was lost and the caller must drop its result.
Both dialects run the same verbs over their own named statements.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

from ductline.dsl.options import DEFAULT_QUEUE
from ductline.errors import LeaseLost

from ductline.model import context_keys
from ductline.model.outcomes import GIVEN_BACK_PATTERN
from ductline.model.states import WorkerStatus
from ductline.store import migrations, payloads
from ductline.store.records import ClaimedJob, ExpiredLease, LoadedDefinition, StepLimit
from ductline.store.session import Dialect
from ductline.store.tx import Tx, next_wakeups, served

__all__ = ["Store", "Tx"]


class Renewal(NamedTuple):
    """What a heartbeat (`Store.renew_leases`) found."""

    now_ms: int            # the database clock
    held: set[str]         # the lease tokens still held
    registered: bool       # whether the worker's row was there to update

class Store:
    """Durable state of ductline over one database (SQLite or PostgreSQL).

    Create one with `ductline.store.open_store(url)`.
    """

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    @property
    def url(self) -> str:
        return self.dialect.url

    # -- schema ------------------------------------------------------------------
    def migrate(self) -> list[int]:
        """Apply pending migrations (``ductline migrate`` does the same); returns the
        versions applied, oldest first (``[]``: the schema was current).

        Raises:
            StoreError: the database refused a migration (the ones before it stay).
        """
        return migrations.migrate(self.dialect)

    def schema_version(self) -> int:
        return migrations.current_version(self.dialect)

    def close(self) -> None:
        """Close the store's connections (a PostgreSQL pool, or the SQLite file)."""
        self.dialect.close()

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        with self.dialect.transaction() as session:
            yield Tx(session, per_level_claims=self.dialect.name == "sqlite", fused=self._statements_whole)

    @contextmanager
    def statementwise(self) -> Iterator[Tx]:
        """A `Tx` whose statements each commit as they run, for a write that one
        statement makes whole (PostgreSQL's autocommit: no ``BEGIN`` and ``COMMIT``
        round trips, the statement's own commit is as durable), or a read that one
        statement's row locks order against writers (`confirm_leases`). On SQLite,
        whose writes of that kind take several statements, and whose readers take no
        locks, an ordinary `transaction`."""
        if not self._statements_whole:
            with self.transaction() as tx:
                yield tx
            return
        with self.dialect.reader() as session:
            yield Tx(session, fused=True)

    @property
    def _statements_whole(self) -> bool:
        # The dialects whose fused statements (`Tx`'s ``fused``) write what SQLite
        # writes with several: a trigger's run, first job and wake-up in one.
        return self.dialect.name != "sqlite"

    # -- clock -------------------------------------------------------------------
    def now_ms(self) -> int:
        """The database clock, in milliseconds since the Unix epoch."""
        with self.dialect.reader() as s:
            return int(s.fetch("now")[0]["now_ms"])

    # -- claiming ------------------------------------------------------------------
    def claim(self, worker_id: str, pipelines: list[str], limit: int, lease_ms: int, *,
              limits: dict[tuple[str, str], StepLimit] | None = None, fifo: bool = False,
              queues: Sequence[str] = (DEFAULT_QUEUE,), definitions: Sequence[str] | None = None) -> list[ClaimedJob]:
        """Claim up to ``limit`` ready jobs of the given pipelines for one worker.

        Higher priority first; at equal priority the jobs of runs under way before
        first steps; then the oldest not-before time (`ductline.model.claim_order`,
        `ductline.store.claims`).
        Each claimed job gets a new lease token and a new attempt row whose start is
        the claim time on the database clock; a pending run becomes running and its
        deadline (if any) starts counting now.

        Args:
            limits: ``{(pipeline, step): StepLimit}`` of the limited steps among
                ``pipelines``; their limits are enforced by this claim.
            fifo: take the oldest ready jobs whatever their priority (workers do
                every `claims.FIFO_EVERY`-th claim so, to bound starvation).
            queues: only jobs waiting in these queues (default: ``"default"``).
            definitions: only jobs of runs of these definition fingerprints
                (``""``: runs started before versions); ``None``: of any.
        """
        if limit <= 0:
            return []
        with self.transaction() as tx:
            return tx.claim(worker_id, pipelines, limit, lease_ms, limits=limits, fifo=fifo,
                            queues=queues, definitions=definitions)

    def unthrottle_idle_keys(self) -> int:
        """Make throttled jobs ready again where nothing of their limit key runs (a
        slot freed by a cancel, a deadline or a rescue); returns how many."""
        with self.dialect.transaction() as s:
            return s.execute("unthrottle_idle_keys")

    def renew_leases(self, worker_id: str, tokens: list[str], lease_ms: int, *, busy: int = 0,
                     undead: int = 0, status: str = WorkerStatus.RUNNING.value,
                     problem: str | None = None) -> "Renewal":
        """Heartbeat: extend the given leases and the worker's row (with its ``status``
        and ``problem``, why it is unhealthy in its own words, or ``None``).

        Returns:
            ``(database_now_ms, tokens_still_held, registered)``; a token missing
            from the set was lost (rescued, cancelled) and its attempt must be
            stopped. ``registered`` is false when the worker has no row (retention
            deleted it while the worker could not heartbeat): it registers again.
        """
        with self.dialect.transaction() as s:
            renewed: set[str] = set()
            if tokens:
                rows = s.fetch("renew_leases", {"tokens": json.dumps(tokens), "lease_ms": lease_ms})
                renewed = {r["lease_token"] for r in rows}
            beat = s.fetch("worker_heartbeat", {"id": worker_id, "busy": busy, "undead": undead,
                                                "status": status, "problem": problem})
            now = int(beat[0]["now_ms"]) if beat else int(s.fetch("now")[0]["now_ms"])
        return Renewal(now, renewed, bool(beat))

    def leases_held(self, tokens: list[str]) -> set[str]:
        """Which of ``tokens`` a `renew_leases` would keep, read without writing: a
        worker whose database cannot notify it of a cancel polls with this."""
        with self.dialect.reader() as s:
            return {r["lease_token"] for r in s.fetch("leases_held", {"tokens": json.dumps(tokens)})}

    def confirm_leases(self, leases: Sequence[tuple[str, str]]) -> set[str]:
        """Which of these leases a worker still holds, read so that no stop of their
        runs can be half done: one still open is waited for. A worker confirms the
        leases of held jobs whose not-before time came before starting them
        (`ductline.runtime.horizon`), so that a stop that judged them not begun
        (`ductline.model.stops.begun_by`) never has them start.

        Args:
            leases: ``(job id, lease token)`` pairs.

        Returns:
            The lease tokens still held (as `renew_leases` would keep them); the
            leases are not extended.

        Raises:
            StoreError: the database could not be asked.
        """
        if not leases:
            return set()
        # PostgreSQL: one statement whose row locks order it against a stop's; SQLite,
        # whose readers never wait for its writer: inside a write transaction, which
        # waits for the stop's (the statement's notes, confirm_leases).
        with self.statementwise() as tx:
            return tx.confirm_leases(leases)

    def expired_leases(self, limit: int = 100) -> list[ExpiredLease]:
        """Attempts whose lease ran out on the database clock (their worker died)."""
        with self.dialect.reader() as s:
            rows = s.fetch("expired_leases", {"limit": limit})
        return [ExpiredLease(r["id"], r["run_id"], r["pipeline"], r["step"], int(r["attempts"]),
                             r["lease_token"], r["definition"], int(r["lease_expires_ms"])) for r in rows]

    def mark_boundary(self, job_id: str, lease_token: str, reason: str) -> bool:
        """Record that an attempt crossed an irreversible boundary (committed on return)."""
        with self.dialect.transaction() as s:
            return s.execute("mark_boundary", {"job_id": job_id, "lease_token": lease_token,
                                               "boundary": reason}) == 1

    def orphaned_runs(self, limit: int = 100) -> list[dict[str, Any]]:
        """Ended runs that still have unfinished jobs (a claim raced their end)."""
        with self.dialect.reader() as s:
            return s.fetch("orphaned_runs", {"limit": limit})

    def due_deadlines(self, limit: int = 100) -> list[dict[str, Any]]:
        """Pending or running runs whose deadline has passed on the database clock."""
        with self.dialect.reader() as s:
            return s.fetch("due_deadlines", {"limit": limit})

    def restart_run_deadline(self, run_id: str, job_id: str, attempt: int, started_ms: int) -> int | None:
        """An attempt claimed ahead began at ``started_ms`` (epoch ms, database clock):
        if its claim started its run and nothing else of the run ran, the run's start
        and deadline move to it (a deadline counts from the first attempt's start).
        Returns the run's new deadline (epoch ms), or ``None`` if it did not move."""
        with self.dialect.transaction() as s:
            rows = s.fetch("restart_run_deadline", {"run_id": run_id, "job_id": job_id, "attempt": attempt,
                                                    "started_ms": started_ms, "given_back": GIVEN_BACK_PATTERN})
        return int(rows[0]["deadline_ms"]) if rows else None

    def set_attempt_deadline(self, job_id: str, attempt: int, lease_token: str, deadline_ms: int) -> bool:
        """Record a scaled deadline reported when the attempt started."""
        with self.dialect.transaction() as s:
            return s.execute("set_attempt_deadline", {"job_id": job_id, "attempt": attempt,
                                                      "lease_token": lease_token, "deadline_ms": deadline_ms}) == 1

    def next_wakeups(self, pipelines: list[str], queues: Sequence[str] = (DEFAULT_QUEUE,),
                     definitions: Sequence[str] | None = None) -> tuple[int | None, int | None]:
        """``(earliest pending not-before, earliest active run deadline)`` in one query:
        what an idle worker sets its timers to (``queues`` and ``definitions`` as in
        `claim`: only jobs it could claim count)."""
        with self.dialect.reader() as s:
            return next_wakeups(s, pipelines, queues, definitions)

    def next_not_before(self, pipelines: list[str], queues: Sequence[str] = (DEFAULT_QUEUE,),
                        definitions: Sequence[str] | None = None) -> int | None:
        """The earliest not-before time of any pending job (the wake-up timer)."""
        with self.dialect.reader() as s:
            rows = s.fetch("next_not_before", {"pipelines": json.dumps(pipelines), **served(queues, definitions)})
        value = rows[0]["not_before_ms"] if rows else None
        return None if value is None else int(value)

    # -- workers -------------------------------------------------------------------
    def register_worker(self, worker_id: str, host: str, pid: int, concurrency: int, *,
                        queues: Sequence[str] = (DEFAULT_QUEUE,),
                        definitions: Sequence[LoadedDefinition] = ()) -> None:
        """Record a worker as running, with the queues it claims from and the
        definitions it loaded (each kept in ``ductline_definitions`` too)."""
        with self.dialect.transaction() as s:
            for d in definitions:
                s.execute("insert_definition", {"fingerprint": d.fingerprint, "pipeline": d.pipeline,
                                                "steps": json.dumps(dict(d.step_queues)),
                                                "queues": json.dumps(d.queues)})
            s.execute("upsert_worker", {"id": worker_id, "host": host, "pid": pid,
                                        "concurrency": concurrency, "queues": json.dumps(sorted(queues)),
                                        "definitions": json.dumps(sorted(d.fingerprint for d in definitions))})

    def worker_stopped(self, worker_id: str) -> None:
        with self.dialect.transaction() as s:
            s.execute("worker_heartbeat", {"id": worker_id, "busy": 0, "undead": 0,
                                           "status": WorkerStatus.STOPPED.value, "problem": None})

    # -- run context ---------------------------------------------------------------
    def context_get(self, run_id: str, key: str) -> str | None:
        """The stored value (JSON text) of ``key``, or ``None``.

        Raises:
            TypeError: a key no value can have (`ductline.model.context_keys`).
        """
        context_keys.check_key(key)
        with self.dialect.reader() as s:
            rows = s.fetch("context_get", {"run_id": run_id, "key": key})
        return rows[0]["value"] if rows else None

    def context_set(self, run_id: str, key: str, value: str, *, overwrite: bool, job_id: str,
                    lease_token: str) -> bool:
        """Store a value for a run on behalf of the attempt of ``job_id`` holding
        ``lease_token``; without ``overwrite`` an existing key is kept and ``False``
        returned.

        Fenced as every attempt write is: the lease is checked, and on PostgreSQL
        share-locked, in the transaction that writes, so a cancel (which takes the
        lease) or a prune of the run either comes after the write or refuses it --
        never a row for a run that is gone.

        Raises:
            LeaseLost: the attempt no longer holds its lease; nothing was stored.
            TypeError: a key with NUL or a lone surrogate (`ductline.model.context_keys`);
                nothing was stored.
        """
        context_keys.check_key(key)
        with self.dialect.transaction() as s:
            if not s.fetch("context_lease", {"run_id": run_id, "job_id": job_id, "lease_token": lease_token}):
                raise LeaseLost(job_id, f"context value {key[:80]!r}")
            name = "context_upsert" if overwrite else "context_insert"
            return s.execute(name, {"run_id": run_id, "key": key, "value": value}) == 1

    # -- operator actions ----------------------------------------------------------
    def revive_run(self, run_id: str, *, force_steps: Iterable[str] = ()) -> bool:
        """Revive a halted run: failed, cancelled and held jobs become pending with
        fresh budgets; the crossed boundaries of ``force_steps`` are cleared
        (`ductline.operations.revive` decides whether a revive is allowed)."""
        with self.dialect.transaction() as s:
            if s.execute("revive_run", {"run_id": run_id}) != 1:
                return False
            s.execute("revive_jobs", {"run_id": run_id, "force_steps": json.dumps(sorted(set(force_steps)))})
            s.fetch("notify", {"origin": ""})
            return True

    def expired_pauses(self, limit: int = 100) -> list[dict[str, Any]]:
        """Paused jobs whose pause expired on the database clock, earliest first."""
        with self.dialect.reader() as s:
            return s.fetch("expired_pauses", {"limit": limit})

    def expired_waits(self, limit: int = 100) -> list[dict[str, Any]]:
        """Deferred jobs whose wait for an event timed out on the database clock,
        earliest first (with ``wait_event``)."""
        with self.dialect.reader() as s:
            return s.fetch("expired_waits", {"limit": limit})

    # -- reads -----------------------------------------------------------------------
    def run_events(self, run_id: str) -> list[dict[str, Any]]:
        """The events sent to a run, oldest first: ``id``, ``name``, ``key``,
        ``data`` (JSON text), ``sent_ms``, ``job_id`` and ``consumed_ms`` (``None``
        while it is kept for a wait)."""
        with self.dialect.reader() as s:
            return s.fetch("run_events", {"run_id": run_id})

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        with self.dialect.reader() as s:
            rows = s.fetch("get_run", {"run_id": run_id})
        return rows[0] if rows else None

    def run_ends(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The times (``created_ms``, ``started_ms``, ``finished_ms``: epoch ms) and
        ``halt_reason`` and ``metadata`` of the runs ``run_ids``, by id, in one query;
        an id with no run is left out."""
        if not run_ids:
            return {}
        with self.dialect.reader() as s:
            rows = s.fetch("run_ends", {"run_ids": json.dumps(run_ids)})
        return {row["id"]: row for row in rows}

    def list_runs(self, status: str | None = None, pipeline: str | None = None,
                  limit: int = 50, *, tags: tuple[tuple[str, str], ...] = ()) -> list[dict[str, Any]]:
        """Runs newest first (by creation, then id), as ``ductline runs`` lists them.

        Args:
            status: only runs with this status (``pending``, ``running``, ``paused``,
                ``halted``, ``completed``, ``failed``, ``cancelled``); ``None``: all.
            pipeline: only runs of the pipeline of this name; ``None``: all.
            limit: at most this many runs.
            tags: ``((key, value), ...)``: only runs carrying every one of these tags,
                sorted and checked as `ductline.model.tags.check_filter` returns them
                (pass them through it: an unchecked filter may match nothing).

        Returns:
            One dict per run: ``id``, ``pipeline``, ``status``, ``halt_reason``,
            ``created_ms``, ``started_ms``, ``finished_ms`` (epoch milliseconds, or
            ``None``) and ``definition`` (the fingerprint it follows, ``""`` for a
            run started before versions were recorded).

        Raises:
            StoreError: the database could not be read.
        """
        if tags:
            from ductline.store import tags as run_tags

            return run_tags.runs(self.dialect, tags, status=status, pipeline=pipeline, limit=limit)
        with self.dialect.reader() as s:
            return s.fetch("list_runs", {"status": status, "pipeline": pipeline, "limit": limit})

    def runs_with_prefix(self, prefix: str) -> list[str]:
        """Run ids starting with ``prefix`` (at most 5), by an index range scan."""
        with self.dialect.reader() as s:
            rows = s.fetch("runs_with_prefix", {"prefix": prefix, "upper": prefix + "\uffff"})
        return [r["id"] for r in rows]

    def run_jobs(self, run_id: str) -> list[dict[str, Any]]:
        with self.dialect.reader() as s:
            return s.fetch("run_jobs", {"run_id": run_id})

    def run_attempts(self, run_id: str) -> list[dict[str, Any]]:
        with self.dialect.reader() as s:
            return s.fetch("run_attempts", {"run_id": run_id})

    def get_attempt(self, job_id: str, attempt: int) -> dict[str, Any] | None:
        """One attempt's row (the `run_attempts` columns), or ``None`` if it was never
        recorded: a point read by its primary key, whatever the size of its run.

        Raises:
            StoreError: the database could not be read.
        """
        with self.dialect.reader() as s:
            rows = s.fetch("get_attempt", {"job_id": job_id, "attempt": attempt})
        return rows[0] if rows else None

    def run_progress(self, run_id: str) -> dict[str, int]:
        with self.dialect.reader() as s:
            return {r["status"]: int(r["n"]) for r in s.fetch("run_progress", {"run_id": run_id})}

    def run_progress_reasons(self, run_id: str) -> list[tuple[str, str | None, int]]:
        """A run's step runs counted as ``(status, skip_reason, count)``.

        Raises:
            StoreError: the database could not be read.
        """
        with self.dialect.reader() as s:
            return [(r["status"], r["skip_reason"], int(r["n"]))
                    for r in s.fetch("run_progress_reasons", {"run_id": run_id})]

    def list_workers(self, limit: int = 100, within_ms: int | None = None) -> list[dict[str, Any]]:
        """The newest ``limit`` worker rows: ``id``, ``host``, ``pid``, ``concurrency``,
        ``busy``, ``undead``, ``status``, ``started_ms``, ``heartbeat_ms``, ``now_ms``
        (the database clock), ``queues``, the names it claims from (a list), and
        ``problem``, why it is unhealthy in its own words (or ``None``).
        ``within_ms``: only the rows whose last heartbeat is at most that old
        (database clock); ``None``: every row."""
        with self.dialect.reader() as s:
            rows = (s.fetch("list_workers", {"limit": limit}) if within_ms is None
                    else s.fetch("list_workers_within", {"limit": limit, "within_ms": within_ms}))
        return [{**r, "queues": _names(r["queues"])} for r in rows]

    def lease_state(self, job_id: str) -> dict[str, Any] | None:
        with self.dialect.reader() as s:
            rows = s.fetch("lease_state", {"job_id": job_id})
        return rows[0] if rows else None

    def running_steps(self, run_id: str) -> list[str]:
        with self.dialect.reader() as s:
            return [r["step"] for r in s.fetch("running_steps", {"run_id": run_id})]


def _names(text: Any) -> list[str]:
    """A stored JSON list of names (a worker's queues); a row written otherwise
    reads as no names rather than failing the listing."""
    try:
        names = json.loads(text)
    except (TypeError, ValueError):
        return []
    return sorted(str(n) for n in names) if isinstance(names, list) else []
