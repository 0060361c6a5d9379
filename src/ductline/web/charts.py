"""The dashboard's picture of time: per minute and per pipeline, what ended, what
waited, how late attempts started and how long they ran -- computed from the
database's own rows (no time-series store), summarised once per minute.

Each minute of the last day is summarised per pipeline (`Minute`):

- **runs finished**, by how they ended (completed, failed, halted, cancelled);
- **failed attempts**, free (before their step crossed a boundary) and paid (after,
  `ductline.web.failures`), by when they ended;
- **ready and delayed jobs**, the average over the minute: a job is *delayed* from
  when it was created (or its previous attempt ended) until its not-before time, then
  *ready* until its attempt starts (or it is skipped or cancelled);
- **start lateness**, from a job's not-before time to its attempt's start, and
  **attempt duration**, from start to end, as log-scale histograms (bins 4 % wide),
  from which percentiles are read.

What the rows no longer hold is not made up: a job keeps only its latest not-before
time, so a wait that ended in a retry counts as delayed throughout (a retry's wait is
its retry delay) and the first wait of a retried job as ready from its creation, and
start lateness is measured on the latest attempt of each job (the one whose
not-before time is known).

`ChartCache` keeps the summaries of minutes that are over (the database clock past
their end by `SETTLE_MS`): a request reads the database only from the first minute
it has not summarised yet, so a chart costs the activity of the minutes since the
last request, and the first one the activity of its window -- never the history.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ductline.model.states import AttemptResult, JobStatus, RunStatus
from ductline.model.stops import stopped_by_deadline
from ductline.web.failures import FAILED_RESULTS

MINUTE_MS = 60_000
# A minute is summarised for good once the database clock is this far past its end
# (an outcome is stamped when its transaction writes it; it commits soon after).
SETTLE_MS = 30_000
# Windows: (minutes shown, minutes per point).
WINDOWS: dict[str, tuple[int, int]] = {"hour": (60, 1), "day": (1440, 10)}
PERCENTILES = (50, 95, 99)
_LOG_STEP = math.log(1.04)


def bin_of(ms: float) -> int:
    """The histogram bin of a duration in milliseconds (0 for under 1 ms)."""
    return 0 if ms < 1 else 1 + int(math.log(ms) / _LOG_STEP)


def value_of(bin_: int) -> float:
    """The duration (ms) a bin stands for: the geometric middle of its range."""
    return 0.0 if bin_ <= 0 else math.exp((bin_ - 0.5) * _LOG_STEP)


def percentile(histogram: Mapping[int, int], p: float) -> float | None:
    """The ``p``-th percentile (nearest rank) of a histogram, in ms; ``None`` when empty."""
    total = sum(histogram.values())
    if not total:
        return None
    rank = max(1, math.ceil(total * p / 100))
    seen = 0
    for bin_ in sorted(histogram):
        seen += histogram[bin_]
        if seen >= rank:
            return value_of(bin_)
    return None  # pragma: no cover - the ranks add up to total


@dataclass(slots=True)
class Minute:
    """One pipeline's activity in one minute (integrals in job-milliseconds)."""

    finished: Counter[str] = field(default_factory=Counter)
    failed_free: int = 0
    failed_paid: int = 0
    ready_ms: float = 0.0
    delayed_ms: float = 0.0
    lateness: Counter[int] = field(default_factory=Counter)
    duration: Counter[int] = field(default_factory=Counter)

    def add(self, other: "Minute") -> None:
        self.finished.update(other.finished)
        self.failed_free += other.failed_free
        self.failed_paid += other.failed_paid
        self.ready_ms += other.ready_ms
        self.delayed_ms += other.delayed_ms
        self.lateness.update(other.lateness)
        self.duration.update(other.duration)


Minutes = dict[int, dict[str, Minute]]  # minute start (ms) -> pipeline -> its activity


def summarise(runs: Iterable[Mapping[str, Any]], activity: Iterable[Mapping[str, Any]], since: int, until: int,
              now: int) -> Minutes:
    """Per minute of ``[since, until)`` (both on a minute) and per pipeline, the
    activity of `chart_runs_finished` rows (buckets of a minute from ``since``) and
    `chart_activity` rows; ``now`` (the database clock) ends waits still open."""
    size = (until - since) // MINUTE_MS
    pipelines: dict[str, _Pipeline] = {}

    def of(name: str) -> _Pipeline:
        found = pipelines.get(name)
        if found is None:
            found = pipelines[name] = _Pipeline(since, size)
        return found

    for row in runs:
        i = int(row["bucket"])
        if 0 <= i < size:
            of(str(row["pipeline"])).finished[i][str(row["status"])] += int(row["n"])
    jobs: dict[str, list[Mapping[str, Any]]] = {}
    for row in activity:
        rows = jobs.get(row["job_id"])
        if rows is None:
            jobs[row["job_id"]] = [row]
        else:
            rows.append(row)
    for rows in jobs.values():
        of(str(rows[0]["pipeline"])).job(rows, until, now)
    out: Minutes = {since + i * MINUTE_MS: {} for i in range(size)}
    for name, acc in pipelines.items():
        for i, minute in acc.minutes():
            out[since + i * MINUTE_MS][name] = minute
    return out


_ENDS_WAIT = frozenset({JobStatus.SKIPPED.value, JobStatus.CANCELLED.value, JobStatus.FAILED.value})
_WAITING_AGAIN = frozenset({JobStatus.PENDING.value, JobStatus.HELD.value})


class _Pipeline:
    """One pipeline's activity, minute by minute (index 0 is ``since``)."""

    def __init__(self, since: int, size: int) -> None:
        self.since, self.size = since, size
        self.until = since + size * MINUTE_MS
        self.finished: list[Counter[str]] = [Counter() for _ in range(size)]
        self.failed_free = [0] * size
        self.failed_paid = [0] * size
        self.duration: list[dict[int, int] | None] = [None] * size  # histograms (`bin_of`)
        self.lateness: list[dict[int, int] | None] = [None] * size
        # Waits: partial minutes in ms, and whole minutes as a difference array (a wait
        # spanning a week costs two additions, not ten thousand).
        self.edges = {True: [0.0] * size, False: [0.0] * size}
        self.whole = {True: [0] * (size + 1), False: [0] * (size + 1)}

    def job(self, rows: list[Mapping[str, Any]], until: int, now: int) -> None:
        """One job's attempts (ended, failed, their lateness and duration) and waits."""
        job = rows[0]
        since = self.since
        ended_at = job["job_finished_ms"]
        if ended_at is not None and ended_at < since:
            return  # a step that ended before the window: nothing of it is in there
        status = job["job_status"]
        created, not_before = job["created_ms"], job["not_before_ms"]
        tried = [r for r in rows if r["attempt"] is not None]
        if len(tried) > 1:
            tried.sort(key=lambda r: r["attempt"])
        latest = job["job_attempts"] or 0
        paid_job = job["crossed"] == 1 and status == JobStatus.FAILED
        known = status not in _WAITING_AGAIN
        begin = created
        count = len(tried)
        for n, a in enumerate(tried):
            result, started, finished = a["result"], a["started_ms"], a["finished_ms"]
            last = a["attempt"] == latest
            if finished is not None and since <= finished < until:
                i = (finished - since) // MINUTE_MS
                hist = self.duration[i]
                if hist is None:
                    hist = self.duration[i] = {}
                key = bin_of(finished - started)
                hist[key] = hist.get(key, 0) + 1
                if paid_job and last and result != AttemptResult.SUCCEEDED:
                    self.failed_paid[i] += 1
                elif result in FAILED_RESULTS and not stopped_by_deadline(result, a["error_type"], a["error_head"]):
                    self.failed_free[i] += 1
            # The job's not-before is that of its latest wait: known for its latest attempt
            # unless a retry has been scheduled since (the job is waiting again).
            if last and known and since <= started < until:
                i = (started - since) // MINUTE_MS
                hist = self.lateness[i]
                if hist is None:
                    hist = self.lateness[i] = {}
                key = bin_of(started - not_before)
                hist[key] = hist.get(key, 0) + 1
            if started >= since:
                current = n == count - 1 and status != JobStatus.PENDING
                self.wait(begin, not_before if current else (created if n == 0 else started), started)
            begin = started if finished is None else finished
        if status == JobStatus.PENDING:
            self.wait(begin, not_before, now)
        elif not tried and status in _ENDS_WAIT and ended_at is not None:
            self.wait(begin, not_before, ended_at)

    def wait(self, begin: int, due: int, end: int) -> None:
        """A wait from ``begin`` to ``end``: delayed until ``due``, ready after."""
        split = min(max(due, begin), end)
        self._add(False, begin, split)
        self._add(True, split, end)

    def _add(self, ready: bool, start: int, end: int) -> None:
        start, end = max(start, self.since), min(end, self.until)
        if end <= start:
            return
        edges = self.edges[ready]
        first = (start - self.since) // MINUTE_MS
        last = (end - self.since - 1) // MINUTE_MS  # end is exclusive
        if first == last:
            edges[first] += end - start
            return
        edges[first] += self.since + (first + 1) * MINUTE_MS - start
        edges[last] += end - (self.since + last * MINUTE_MS)
        if last > first + 1:
            whole = self.whole[ready]
            whole[first + 1] += 1
            whole[last] -= 1

    def minutes(self) -> Iterable[tuple[int, Minute]]:
        """``(index, Minute)`` of every minute with some activity."""
        running = {True: 0, False: 0}
        for i in range(self.size):
            waited = {}
            for ready in (True, False):
                running[ready] += self.whole[ready][i]
                waited[ready] = self.edges[ready][i] + running[ready] * MINUTE_MS
            m = Minute(self.finished[i], self.failed_free[i], self.failed_paid[i], waited[True], waited[False],
                       Counter(self.lateness[i] or {}), Counter(self.duration[i] or {}))
            if m.finished or m.failed_free or m.failed_paid or m.ready_ms or m.delayed_ms or m.lateness \
                    or m.duration:
                yield i, m


# -- series of a window -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Point:
    """One point of a window: ``start`` (ms) and the minutes it covers, with counts
    over them (rates divide by ``minutes``) and averages."""

    start: int
    minutes: int
    runs_finished: int
    runs_failed: int       # failed only: a halted run is not failed (it can be retried)
    runs_halted: int
    failed_free: int       # attempts
    failed_paid: int
    ready: float           # average jobs waiting
    delayed: float
    lateness: dict[int, float | None]   # percentile -> ms
    duration: dict[int, float | None]

    @property
    def finished(self) -> float:
        """Runs finished per minute."""
        return self.runs_finished / self.minutes

    @property
    def failed(self) -> float:
        return self.runs_failed / self.minutes

    @property
    def halted(self) -> float:
        return self.runs_halted / self.minutes

    @property
    def free(self) -> float:
        """Free failed attempts per minute."""
        return self.failed_free / self.minutes

    @property
    def paid(self) -> float:
        return self.failed_paid / self.minutes


def point(minutes: Minutes, pipeline: str | None, first: int, count: int) -> Point:
    """The point of ``count`` minutes from ``first``, of one pipeline (``None``: all)."""
    merged = Minute()
    for m in range(first, first + count * MINUTE_MS, MINUTE_MS):
        for name, stats in minutes.get(m, {}).items():
            if pipeline is None or name == pipeline:
                merged.add(stats)
    span = count * MINUTE_MS
    return Point(first, count, sum(merged.finished.values()),
                 merged.finished[RunStatus.FAILED], merged.finished[RunStatus.HALTED], merged.failed_free,
                 merged.failed_paid, merged.ready_ms / span, merged.delayed_ms / span,
                 {p: percentile(merged.lateness, p) for p in PERCENTILES},
                 {p: percentile(merged.duration, p) for p in PERCENTILES})


@dataclass(frozen=True, slots=True)
class Window:
    """A chart window: its points, oldest first, and totals over it."""

    name: str
    pipeline: str | None
    points: list[Point]
    now_ms: int
    pipelines: list[str]

    @property
    def totals(self) -> dict[str, int]:
        """Runs finished (any end), failed and halted, attempts failed free and paid,
        over the window."""
        return {"finished": sum(p.runs_finished for p in self.points),
                "failed": sum(p.runs_failed for p in self.points),
                "halted": sum(p.runs_halted for p in self.points),
                "failed_free": sum(p.failed_free for p in self.points),
                "failed_paid": sum(p.failed_paid for p in self.points)}


@dataclass(slots=True)
class _Reading:
    """A read of the database in progress: the minutes it covers, and when it is done."""

    since: int
    until: int
    done: threading.Event = field(default_factory=threading.Event)


class ChartCache:
    """Minute summaries of the last day, read from the database as they are needed,
    and the points made of them once their minutes are over.

    The database is read outside the lock: a long read (a day, after a start) never
    holds up a short one (the overview's hour); a request whose minutes a read in
    progress covers waits for it instead of repeating it.

    Args:
        fetch: ``fetch(since, until)`` -> ``(runs rows, activity rows)``:
            `chart_runs_finished` (buckets of a minute from ``since``) and
            `chart_activity` rows (`ductline.web.reader.DashboardReader.chart_rows`).
        now: the database clock (ms).
    """

    def __init__(self, fetch: Callable[[int, int], tuple[list[dict[str, Any]], list[dict[str, Any]]]],
                 now: Callable[[], int]) -> None:
        self._fetch = fetch
        self._now = now
        self._settled: Minutes = {}
        self._points: dict[tuple[int, str | None, int], Point] = {}
        self._reading: list[_Reading] = []
        self._lock = threading.Lock()

    def window(self, name: str, pipeline: str | None = None) -> Window:
        """Window ``name`` (``hour`` or ``day``) of one pipeline (``None``: all),
        ending with the last whole minute (the day: the last whole ten minutes).

        Raises:
            KeyError: an unknown window name.
            StoreError: the database failed.
        """
        count, step = WINDOWS[name]
        now = self._now()
        end = now - now % (step * MINUTE_MS)
        start = end - count * MINUTE_MS
        fresh = self._read(start, end, now)
        with self._lock:
            minutes = {**fresh, **self._settled}
            points = []
            for first in range(start, end, step * MINUTE_MS):
                key = (step, pipeline, first)
                found = self._points.get(key)
                if found is None:
                    found = point(minutes, pipeline, first, step)
                    if first + step * MINUTE_MS + SETTLE_MS <= now:
                        self._points[key] = found
                points.append(found)
        names = sorted({p for m in range(start, end, MINUTE_MS) for p in minutes.get(m, {})})
        return Window(name, pipeline, points, now, names)

    def _read(self, start: int, end: int, now: int) -> Minutes:
        """The minutes of ``[start, end)`` not summarised for good yet, read now (or
        by a read in progress that covers them)."""
        while True:
            with self._lock:
                missing = [m for m in range(start, end, MINUTE_MS) if m not in self._settled]
                if not missing:
                    return {}
                since = missing[0]
                # A read in progress that covers these minutes is waited for -- unless it
                # is much longer than this one (the day's read after a start, seen by the
                # hour's request when both end on the same minute): that would hold a
                # short read up behind a long one.
                covering = next((r for r in self._reading if r.since <= since and r.until >= end
                                 and r.until - r.since <= 2 * (end - since)), None)
                if covering is None:
                    reading = _Reading(since, end)
                    self._reading.append(reading)
                    break
            covering.done.wait()  # then look again: what it read is settled now
        try:
            runs, activity = self._fetch(since, end)
            fresh = summarise(runs, activity, since, end, now)
            with self._lock:
                for m, stats in fresh.items():
                    if m + MINUTE_MS + SETTLE_MS <= now:
                        self._settled[m] = stats
                # Kept: the longest window, from the start it has on the coarsest step.
                self._forget(now - max((c + s) * MINUTE_MS for c, s in WINDOWS.values()))
            return fresh
        finally:
            with self._lock:
                self._reading.remove(reading)
            reading.done.set()

    @property
    def minutes_held(self) -> int:
        """How many minutes are summarised for good (at most a day and a bit)."""
        with self._lock:
            return len(self._settled)

    def _forget(self, oldest: int) -> None:
        for m in [m for m in self._settled if m < oldest]:
            del self._settled[m]
        for key in [k for k in self._points if k[2] < oldest]:
            del self._points[key]
