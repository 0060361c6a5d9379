"""The metrics' event subscriber (`MetricsSubscriber`): engine events into
counter increments and histogram samples of the registry."""

from __future__ import annotations

import logging
from typing import Any

from ductline.errors import StoreError
from ductline.model import stops
from ductline.model.states import HaltReason, RunStatus
from ductline.observability.events import EventName
from ductline.observability.metrics.registry import Registry

log = logging.getLogger("ductline.observability")


# The `result` labels of failed attempts (job.completed's seeds' names).
FAILED_LABELS = frozenset({"error", "timed_out", "crashed"})


def failure_cost(attributes: dict[str, Any]) -> str | None:
    """``"paid"`` for an attempt that ended unsuccessfully after its step crossed a
    boundary (the rulebook halts it ``unsafe_to_retry``, whatever ended it),
    ``"free"`` for any other errored, timed-out or crashed attempt, ``None`` for
    the rest (a success, a cancel, a release, one its run's deadline stopped: no
    retry follows it, the run failed). Takes a ``job.completed`` event's
    attributes."""
    if attributes.get("reason") == HaltReason.UNSAFE_TO_RETRY:
        return "paid"
    if attributes.get("reason") == stops.DEADLINE_REASON:
        return None
    return "free" if attributes.get("result") in FAILED_LABELS else None



# The `result` label of pipeline.runtime: the status the run ended in.
_RUN_ENDS = {EventName.PIPELINE_COMPLETED: RunStatus.COMPLETED, EventName.PIPELINE_HALTED: RunStatus.HALTED,
             EventName.PIPELINE_FAILED: RunStatus.FAILED, EventName.PIPELINE_CANCELLED: RunStatus.CANCELLED}


class MetricsSubscriber:
    """Turns engine events into registry updates (subscribe it with
    `ductline.observability.events.subscribe`).

    Args:
        registry: where the values go.
        store: used only to read a run's duration when a run-end event does not
            carry ``runtime_seconds`` (``started_ms``/``finished_ms`` of the run).
    """

    def __init__(self, registry: Registry, store: Any = None) -> None:
        self.registry = registry
        self.store = store

    def __call__(self, name: EventName, a: dict[str, Any]) -> None:
        r = self.registry
        pipeline, step = a.get("pipeline"), a.get("step")
        if name is EventName.PIPELINE_TRIGGERED:
            r.add("ductline.pipeline.triggered", pipeline=pipeline)
        elif name is EventName.JOB_ENQUEUED:
            r.add("ductline.job.enqueued", a.get("count", 1), pipeline=pipeline, step=step)
        elif name is EventName.ATTEMPT_STARTED:
            if a.get("pickup_latency_seconds") is not None:
                r.observe("ductline.job.pickup_latency", a["pickup_latency_seconds"], pipeline=pipeline, step=step)
        elif name is EventName.JOB_COMPLETED:
            r.add("ductline.job.attempts", pipeline=pipeline, step=step, result=a.get("result"))
            r.add("ductline.job.completed", pipeline=pipeline, step=step, result=a.get("result"))
            if a.get("runtime_seconds") is not None:
                r.observe("ductline.job.runtime", a["runtime_seconds"], pipeline=pipeline, step=step,
                          result=a.get("result"))
            cost = failure_cost(a)
            if cost is not None:
                r.add(f"ductline.job.failures.{cost}", pipeline=pipeline, step=step, result=a.get("result"))
        elif name is EventName.TIMEOUT_OVERRUN:
            r.observe("ductline.timeout.overrun", a.get("overrun_seconds") or 0.0, pipeline=pipeline, step=step)
        elif name is EventName.THREAD_UNDEAD:
            r.add("ductline.thread.undead", pipeline=pipeline, step=step)
        elif name is EventName.PROCESS_UNDEAD:
            r.add("ductline.process.undead", pipeline=pipeline, step=step)
        elif name is EventName.LEASE_LOST:
            r.add("ductline.lease.lost", pipeline=pipeline, step=step)
        elif name is EventName.EVENT_RECEIVED:
            r.add("ductline.events.received", pipeline=pipeline)
        elif name is EventName.STEP_MARKED_SUCCEEDED:
            r.add("ductline.steps.marked_succeeded", pipeline=pipeline, step=step)
        elif name is EventName.SCHEDULE_RUNS_STARTED:
            r.add("ductline.schedule.runs", a.get("count", 1), pipeline=pipeline, reason=a.get("reason"))
        elif name in _RUN_ENDS:
            self._run_ended(name, a)

    def _run_ended(self, name: EventName, a: dict[str, Any]) -> None:
        r = self.registry
        pipeline = a.get("pipeline")
        result = _RUN_ENDS[name]
        if name is EventName.PIPELINE_COMPLETED:
            r.add("ductline.pipeline.completed", pipeline=pipeline)
        elif name is EventName.PIPELINE_HALTED:
            r.add("ductline.pipeline.halted", pipeline=pipeline, reason=a.get("reason"))
        elif name is EventName.PIPELINE_FAILED:
            r.add("ductline.pipeline.failed", pipeline=pipeline, reason=a.get("reason") or stops.DEADLINE_REASON)
        else:
            r.add("ductline.pipeline.cancelled", pipeline=pipeline)
        runtime = a.get("runtime_seconds")
        if runtime is None:
            runtime = self._run_runtime(a.get("run_id"))
        if runtime is not None:
            r.observe("ductline.pipeline.runtime", runtime, pipeline=pipeline, result=result)

    def _run_runtime(self, run_id: str | None) -> float | None:
        if self.store is None or run_id is None:
            return None
        try:
            run = self.store.get_run(run_id)
        except StoreError as exc:
            log.warning("cannot read run %s for pipeline.runtime: %s", run_id, exc)
            return None
        if run is None or run.get("finished_ms") is None:
            return None
        start = run.get("started_ms") or run.get("created_ms")
        return None if start is None else max(0.0, (int(run["finished_ms"]) - int(start)) / 1000)
