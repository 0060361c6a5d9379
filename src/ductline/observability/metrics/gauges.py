"""The gauges' sources: one aggregate query each (`queue_depths` and the others),
read on demand and shared by simultaneous readers (`CachedReading`)."""

from __future__ import annotations

import threading
import time
from typing import Any, Iterable


def queue_depths(store: Any) -> dict[str, tuple[int, int, int]]:
    """``{pipeline: (ready, delayed, throttled)}`` of the pending jobs, from one aggregate
    query (``metrics_queue_depths``) over the partial index of pending jobs.
    Read-only; pipelines without pending jobs are absent."""
    with store.dialect.reader() as session:
        rows = session.fetch("metrics_queue_depths", {})
    return {r["pipeline"]: (int(r["ready"] or 0), int(r["delayed"] or 0), int(r["throttled"] or 0))
            for r in rows}


class CachedReading:
    """A gauge source over one database reading (`read`), shared by every reader for
    ``cache_seconds`` so simultaneous readers cost one query. With a ``zero``, a key
    once seen reads ``zero`` when the database no longer has it (a pipeline whose
    queue drained reads 0 instead of vanishing); keys come sorted then."""

    def __init__(self, store: Any, cache_seconds: float, zero: Any = None, known: Iterable[Any] = ()) -> None:
        self.store = store
        self.cache_seconds = cache_seconds
        self._zero = zero
        self._known = set(known)
        self._lock = threading.Lock()
        self._cached: dict[Any, Any] | None = None
        self._at = 0.0

    def read(self) -> dict[Any, Any]:
        """One reading from the database."""
        raise NotImplementedError

    def __call__(self) -> dict[Any, Any]:
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._at >= self.cache_seconds:
                found = self.read()
                if self._zero is not None:
                    self._known.update(found)
                    found = {key: found.get(key, self._zero) for key in sorted(self._known)}
                self._cached, self._at = found, now
            return dict(self._cached)

    def _fetch(self, statement: str) -> list[dict[str, Any]]:
        with self.store.dialect.reader() as session:
            rows: list[dict[str, Any]] = session.fetch(statement, {})
        return rows


class QueueDepths(CachedReading):
    """The ready, delayed and running jobs per pipeline (`queue_depths`); a pipeline
    once seen reads ``(0, 0, 0)``."""

    def __init__(self, store: Any, cache_seconds: float = 1.0, pipelines: Iterable[str] = ()) -> None:
        super().__init__(store, cache_seconds, zero=(0, 0, 0), known=pipelines)

    def read(self) -> dict[str, tuple[int, int, int]]:
        return queue_depths(self.store)


class QueueServing(CachedReading):
    """The ready jobs and live workers of each queue (`ductline.store.fleet`) as
    ``{queue: (ready, workers)}``; a queue once seen reads ``(0, 0)``."""

    def __init__(self, store: Any, cache_seconds: float = 1.0) -> None:
        super().__init__(store, cache_seconds, zero=(0, 0))

    def read(self) -> dict[str, tuple[int, int]]:
        from ductline.model.serving import workers_per_queue
        from ductline.store import fleet

        ready = fleet.ready_per_queue(self.store)
        workers = workers_per_queue(fleet.live_offers(self.store))
        return {q: (ready.get(q, 0), workers.get(q, 0)) for q in set(ready) | set(workers)}


class RunCounts(CachedReading):
    """The runs per pipeline and status (``metrics_run_counts``)."""

    def __init__(self, store: Any, cache_seconds: float = 5.0) -> None:
        super().__init__(store, cache_seconds)

    def read(self) -> dict[tuple[str, str], int]:
        return {(r["pipeline"], r["status"]): int(r["n"]) for r in self._fetch("metrics_run_counts")}


class EventWaits(CachedReading):
    """The step runs waiting for an event per pipeline (``metrics_event_waits``, over
    the partial index of deferred jobs); a pipeline once seen reads 0."""

    def __init__(self, store: Any, cache_seconds: float = 1.0) -> None:
        super().__init__(store, cache_seconds, zero=0)

    def read(self) -> dict[str, int]:
        return {r["pipeline"]: int(r["n"]) for r in self._fetch("metrics_event_waits")}


class ChildCounts(CachedReading):
    """Waiting parents and unfinished child runs per pipeline (``metrics_child_counts``:
    ``{(pipeline, "awaiting" | "children"): n}``); a key once seen reads 0."""

    def __init__(self, store: Any, cache_seconds: float = 5.0) -> None:
        super().__init__(store, cache_seconds, zero=0)

    def read(self) -> dict[tuple[str, str], int]:
        return {(r["pipeline"], r["kind"]): int(r["n"]) for r in self._fetch("metrics_child_counts")}
