"""`DashboardReader`: the dashboard's only way to read the database.

It calls the `Store`'s read verbs and the read-only statements of the dialects'
``web_queries.sql`` (outside the store nothing writes SQL). Nothing here writes: the
dashboard's actions go through `ductline.operations`.
"""

from __future__ import annotations

import json

import re
from dataclasses import dataclass
from typing import Any, Iterator

from ductline import numerals, views
from ductline.errors import RunNotFound
from ductline.model import tags as tag_rules
from ductline.model import workers as worker_rule
from ductline.model.states import JobStatus, RunStatus
from ductline.model.serving import Offer, workers_per_queue
from ductline.store import Store
from ductline.store import operator
from ductline.store import tags as run_tags
from ductline.web.graph import Shown

# A cursor later than any run: the first page of a newest-first listing.
_TOP_MS = 2 ** 62
_PAYLOAD_ID = re.compile(r"[0-9a-f]{32}")
# ASCII digits only: ``\d`` would take other scripts' digits, which int() then reads.
_CURSOR = re.compile(r"^([0-9]{1,18})\.([0-9A-Za-z_-]{1,128})$")
MAX_PAGE = 200
STATUSES = tuple(s.value for s in RunStatus)
# Counts on the overview are exact up to this; above it they read "1,000+" (counting
# further would cost a read of the whole history on every refresh).
COUNT_CAP = 1_000


class BadQuery(ValueError):
    """A filter, cursor or limit the dashboard cannot read (the client's mistake)."""


def query_number(name: str, text: str, low: int, high: int, meaning: str) -> int:
    """A whole-number query parameter, in ASCII digits (`ductline.numerals.whole_number`:
    ``str.isdigit`` also takes ``"²"``, which int() refuses, and ``"١٢"``, which it
    reads as 12).

    Args:
        name: the parameter's name, for the message.
        text: its value as sent.
        low, high: the range it must fall in (inclusive).
        meaning: what it is, for the message (``"an integer from 1 to 200"``).

    Raises:
        BadQuery: not ASCII digits, or out of range; the message names the parameter.
    """
    try:
        value = numerals.whole_number(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise BadQuery(f"{name} must be {meaning}, got {text[:30]!r}")
    return value


@dataclass(frozen=True, slots=True)
class RunsPage:
    """One page of a newest-first run listing.

    Attributes:
        runs: the rows, newest first.
        older: cursor of the page after this one (older runs), or ``None``.
        newer: cursor of the page before this one (newer runs), or ``None`` on the first page.
    """

    runs: list[dict[str, Any]]
    older: str | None
    newer: str | None


def encode_cursor(row: dict[str, Any]) -> str:
    return f"{int(row['created_ms'])}.{row['id']}"


def decode_cursor(cursor: str) -> tuple[int, str]:
    """``"created_ms.run_id"`` -> ``(created_ms, run_id)``.

    Raises:
        BadQuery: not a cursor this dashboard handed out.
    """
    match = _CURSOR.match(cursor)
    if match is None:
        raise BadQuery(f"malformed cursor {cursor[:80]!r}: expected CREATED_MS.RUN_ID as given by a previous page")
    return int(match.group(1)), match.group(2)


def check_filters(status: str | None, pipeline: str | None) -> tuple[str | None, str | None]:
    """Normalise listing filters: empty strings mean "any".

    Raises:
        BadQuery: an unknown status or an overlong pipeline name.
    """
    status = status or None
    pipeline = pipeline or None
    if status is not None and status not in STATUSES:
        raise BadQuery(f"unknown status {status[:40]!r}; use one of {', '.join(STATUSES)}")
    if pipeline is not None and len(pipeline) > 200:
        raise BadQuery("pipeline filter is longer than 200 characters")
    return status, pipeline


def check_tag_filter(texts: list[str]) -> tuple[tuple[str, str], ...]:
    """Tag filters as given in a query string (``tag=customer=acme``, repeated: all of
    them), checked (`ductline.model.tags.check_filter`).

    Raises:
        BadQuery: a filter that is not ``KEY=VALUE`` or is past a tag's limits.
    """
    try:
        return tag_rules.check_filter(tag_rules.parse_tag(t) for t in texts if t)
    except (TypeError, ValueError) as exc:
        raise BadQuery(f"tag filter: {exc}") from None


class DashboardReader:
    """Read-only queries of the dashboard over one `Store`."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def _fetch(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._store.dialect.reader() as session:
            return session.fetch(name, params or {})

    # -- overview ------------------------------------------------------------------
    def now_ms(self) -> int:
        """The database clock (countdowns and ages are measured against it)."""
        return self._store.now_ms()

    def run_counts(self) -> dict[str, int]:
        """Runs by status, every status present (0 when none). A count is exact up
        to `COUNT_CAP`; more is reported as ``COUNT_CAP + 1`` (its cost does not
        grow with history)."""
        counts = {s: 0 for s in STATUSES}
        for row in self._fetch("web_run_counts", {"statuses": json.dumps(STATUSES), "cap": COUNT_CAP}):
            counts[row["status"]] = int(row["n"])
        return counts

    def pipeline_counts(self) -> dict[str, dict[str, int]]:
        """``{pipeline: {status: runs}}`` for every pipeline that has runs, each
        count capped as in `run_counts`."""
        out: dict[str, dict[str, int]] = {}
        statuses = json.dumps(STATUSES)
        for pipeline in self.pipeline_names():
            counts = out[pipeline] = {s: 0 for s in STATUSES}
            for row in self._fetch("web_pipeline_counts", {"pipeline": pipeline, "statuses": statuses,
                                                           "cap": COUNT_CAP}):
                counts[row["status"]] = int(row["n"])
        return out

    def pipeline_names(self) -> list[str]:
        """The pipelines that have runs, sorted (one index probe per pipeline)."""
        return [row["pipeline"] for row in self._fetch("web_pipeline_names")]

    def job_counts(self) -> dict[str, int]:
        """Jobs ``ready`` (pending, due), ``delayed`` (pending, not yet due), ``running`` and
        ``throttled`` (pending, waiting for a concurrency slot), plus ``now_ms``, the
        database clock they were counted against."""
        row = self._fetch("web_job_counts")[0]
        return {k: int(row[k] or 0) for k in (Shown.READY, Shown.DELAYED, JobStatus.RUNNING, Shown.THROTTLED,
                                              "now_ms")}

    def schedules(self) -> list[dict[str, Any]]:
        """Every schedule (`ductline.store.schedules.list_all`), by name."""
        from ductline.store import schedules

        return schedules.list_all(self._store)

    def offers(self, lease_seconds: float) -> list[Offer]:
        """What each live worker claims (heartbeat within a lease: `workers`'s healthy
        and late ones)."""
        from ductline.store import fleet

        return fleet.live_offers(self._store, lease_seconds)

    def queues(self, lease_seconds: float) -> list[dict[str, Any]]:
        """Each queue with ready jobs or live workers: ``{queue, ready, workers}``,
        by name (a queue with ready jobs and no live worker is work nobody does)."""
        from ductline.store import fleet

        ready = fleet.ready_per_queue(self._store)
        workers = workers_per_queue(self.offers(lease_seconds))
        return [{"queue": q, "ready": ready.get(q, 0), "workers": workers.get(q, 0)}
                for q in sorted(set(ready) | set(workers))]

    def workers(self, lease_seconds: float, limit: int = 100, everything: bool = False) -> list[dict[str, Any]]:
        """Worker processes with their health, judged by heartbeat age against the lease
        (`ductline.model.workers`: healthy, late, unhealthy, lost, stopped), worst first:
        the live ones and those stopped or lost recently (`ductline.model.workers.shown_within_ms`),
        or every row with ``everything``."""
        lease_ms = round(lease_seconds * 1000)
        out = []
        for row in self._store.list_workers(limit, None if everything else worker_rule.shown_within_ms(lease_ms)):
            age_ms = max(0, int(row["now_ms"]) - int(row["heartbeat_ms"]))
            health = worker_rule.judge(row["status"], age_ms, lease_ms)
            out.append({
                "id": row["id"], "host": row["host"], "pid": int(row["pid"]),
                "concurrency": int(row["concurrency"]), "busy": int(row["busy"]),
                "undead": int(row["undead"]), "status": row["status"], "health": health.value,
                "live": worker_rule.is_live(health),
                "heartbeat_age_seconds": round(age_ms / 1000, 1),
                "started_at": views.iso(row["started_ms"]), "heartbeat_at": views.iso(row["heartbeat_ms"]),
                "queues": row["queues"],
                # Why an unhealthy worker says it is (its step children fail to start ...).
                "problem": row.get("problem") if health is worker_rule.WorkerHealth.UNHEALTHY else None,
            })
        order = {h.value: i for i, h in enumerate(worker_rule.WORST_FIRST)}
        out.sort(key=lambda w: order[w["health"]])
        return out

    def chart_rows(self, since_ms: int, until_ms: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """What the charts summarise of ``[since_ms, until_ms)`` (`ductline.web.charts`):
        runs that ended, per pipeline, status and minute (``bucket`` counts minutes from
        ``since_ms``), and the jobs and attempts of the runs active now or ended since
        ``since_ms``. Their cost follows the window's activity, not the history's size."""
        with self._store.dialect.reader() as session:
            runs = session.fetch("chart_runs_finished", {"since": since_ms, "until": until_ms, "bucket_ms": 60_000})
            activity = session.fetch("chart_activity", {"since": since_ms})
        return runs, activity

    # -- run listings ----------------------------------------------------------------
    def runs_page(self, *, status: str | None = None, pipeline: str | None = None, after: str | None = None,
                  before: str | None = None, limit: int = 50,
                  tags: tuple[tuple[str, str], ...] = ()) -> RunsPage:
        """A page of runs newest first, filtered by status, pipeline and tags (checked
        by `check_tag_filter`; a run must carry every one).

        Args:
            after: cursor of the last run of the previous page: list older runs.
            before: cursor of the first run of the next page: list newer runs.
            limit: runs per page, 1 to 200.

        Raises:
            BadQuery: bad filters or cursor, both cursors, or a limit out of range.
        """
        status, pipeline = check_filters(status, pipeline)
        if after and before:
            raise BadQuery("give either after or before, not both")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise BadQuery(f"limit must be an integer from 1 to {MAX_PAGE}")
        if tags:
            return self._tagged_page(tags, status, pipeline, after, before, limit)
        suffix = ("_pipeline" if pipeline else "") + ("_status" if status else "")
        params: dict[str, Any] = {"limit": limit + 1}
        if status:
            params["status"] = status
        if pipeline:
            params["pipeline"] = pipeline
        if before:
            params["created_ms"], params["id"] = decode_cursor(before)
            rows = self._fetch(f"web_runs_newer{suffix}", params)
            if len(rows) <= limit:  # back at the newest runs: show the first page as it is now
                return self.runs_page(status=status, pipeline=pipeline, limit=limit)
            rows = list(reversed(rows[:limit]))
            return RunsPage(rows, encode_cursor(rows[-1]), encode_cursor(rows[0]))
        if after:
            params["created_ms"], params["id"] = decode_cursor(after)
        else:
            params["created_ms"], params["id"] = _TOP_MS, ""
        rows = self._fetch(f"web_runs_older{suffix}", params)
        more = len(rows) > limit
        rows = rows[:limit]
        return RunsPage(rows, encode_cursor(rows[-1]) if rows and more else None,
                        encode_cursor(rows[0]) if rows and after else (after if after else None))

    def _tagged_page(self, tags: tuple[tuple[str, str], ...], status: str | None, pipeline: str | None,
                     after: str | None, before: str | None, limit: int) -> RunsPage:
        """`runs_page` with tags: the same pages, read through the tags' index."""
        dialect = self._store.dialect
        if before:
            rows = run_tags.runs(dialect, tags, status=status, pipeline=pipeline, cursor=decode_cursor(before),
                                 newer=True, limit=limit + 1)
            if len(rows) <= limit:
                return self._tagged_page(tags, status, pipeline, None, None, limit)
            rows = list(reversed(rows[:limit]))
            return RunsPage(rows, encode_cursor(rows[-1]), encode_cursor(rows[0]))
        cursor = decode_cursor(after) if after else (_TOP_MS, "")
        rows = run_tags.runs(dialect, tags, status=status, pipeline=pipeline, cursor=cursor, limit=limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return RunsPage(rows, encode_cursor(rows[-1]) if rows and more else None,
                        encode_cursor(rows[0]) if rows and after else (after if after else None))

    def operator_actions(self, run_id: str) -> list[dict[str, Any]]:
        """The run's operator actions (who marked which step run succeeded, when, why),
        oldest first, as `ductline show --json` gives them."""
        return views.operator_actions(self._store, run_id)

    def step_marks(self, run_id: str) -> dict[str, dict[str, Any]]:
        """Who marked each of the run's step runs succeeded, by job id
        (`ductline.views.marks_by_job`)."""
        return views.marks_by_job(operator.actions_of_run(self._store.dialect, run_id))

    def run_tags(self, run_id: str) -> dict[str, str]:
        """The run's tags, ``{key: value}`` in key order."""
        return run_tags.of_run(self._store.dialect, run_id)

    # -- one run ---------------------------------------------------------------------
    def resolve(self, text: str) -> str:
        """The full id of the run ``text`` names: a full id, or a unique prefix of at
        least 6 characters, as the CLI takes (`ductline.views.resolve_run_id`).

        Raises:
            RunNotFound: no run, or several runs, start with it.
        """
        return views.resolve_run_id(self._store, text)

    def existing(self, text: str) -> str:
        """The full id of an existing run ``text`` names (`resolve`, then checked).

        Raises:
            RunNotFound: no run, or several runs, start with it.
        """
        run_id = self.resolve(text)
        self.run(run_id)
        return run_id

    def run(self, run_id: str) -> dict[str, Any]:
        """The run's row.

        Raises:
            RunNotFound: no such run.
        """
        row = self._store.get_run(run_id)
        if row is None:
            raise RunNotFound(f"run {run_id!r} not found")
        return row

    def readiness(self) -> Any:
        """The readiness probe of this dashboard's database
        (`ductline.observability.probes.readiness`)."""
        from ductline.observability import probes

        return probes.readiness(self._store)

    def step_logs(self, run_id: str, step: str | None = None) -> list[dict[str, Any]]:
        """What the run's attempts logged (of ``step`` only, when given), oldest first:
        ``{job_id, step, scope, attempt, at, level, logger, message}`` each."""
        from ductline.store import steplogs

        return [{"job_id": r.job_id, "step": r.step, "scope": r.scope, "attempt": r.attempt, **views.log_entry(r)}
                for r in steplogs.of_run(self._store.dialect, run_id, step)]

    def child_runs(self, parent: str, *, status: str | None = None, pipeline: str | None = None,
                   limit: int = 50) -> list[dict[str, Any]]:
        """The child runs that run ``parent`` (an id or a unique prefix) started, newest
        first, filtered by status and pipeline.

        Raises:
            RunNotFound: no such parent run.
            BadQuery: bad filters, or a limit out of range.
        """
        from ductline.store import children as child_rows

        status, pipeline = check_filters(status, pipeline)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise BadQuery(f"limit must be an integer from 1 to {MAX_PAGE}")
        with self._store.dialect.reader() as session:
            return child_rows.list_child_runs(session, self.resolve(parent), status, pipeline, limit)

    def run_reasons(self, rows: list[dict[str, Any]]) -> dict[str, str]:
        """Why each run of ``rows`` stopped, by run id (`ductline.views.run_reasons`)."""
        return views.run_reasons(self._store, rows)

    def family(self, run_id: str) -> dict[str, Any]:
        """The run's parent and child runs (`ductline.views.run_family`)."""
        return views.run_family(self._store, run_id)

    def run_jobs(self, run_id: str) -> list[dict[str, Any]]:
        return self._store.run_jobs(run_id)

    def run_attempts(self, run_id: str) -> list[dict[str, Any]]:
        return self._store.run_attempts(run_id)

    def payload(self, run_id: str, payload_id: str) -> dict[str, Any] | None:
        """``{id, run_id, size, chunks, created_ms}`` of an out-of-line value of the run,
        or ``None`` (also for a malformed id)."""
        from ductline.store import payloads

        if not _PAYLOAD_ID.fullmatch(payload_id):
            return None
        row = payloads.info(self._store, payload_id)
        return row if row is not None and row["run_id"] == run_id else None

    def payload_text(self, run_id: str, text: str | None) -> str | None:
        """Stored JSON text with its out-of-line values read back in full
        (`ductline.store.payloads.load`).

        Raises:
            StoreError: a payload is missing or incomplete.
        """
        from ductline.store import payloads

        return payloads.load(self._store, run_id, text)

    def payload_chunks(self, run_id: str, payload_id: str) -> Iterator[bytes]:
        """The value's stored JSON text, one chunk (256 KiB) at a time."""
        from ductline.store import payloads

        return payloads.stream(self._store, run_id, payload_id)

    def sent_events(self, run_id: str) -> list[dict[str, Any]]:
        """The events sent to the run, oldest first (`ductline.store.Store.run_events`)."""
        return self._store.run_events(run_id)

    def run_events(self, run_id: str) -> list[dict[str, Any]]:
        """Every attempt of the run with its step, oldest first (the event stream's source)."""
        return self._fetch("web_run_events", {"run_id": run_id})
