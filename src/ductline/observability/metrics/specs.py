"""The metrics ductline exports (`METRICS`): each one's dotted name, kind, labels
and unit, and the names of the gauges read on demand."""

from __future__ import annotations

from dataclasses import dataclass

COUNTER = "counter"
HISTOGRAM = "histogram"
GAUGE = "gauge"

# Histogram bucket upper bounds, in seconds (attempts of milliseconds up to runs of a day).
BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                              120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric: ``name`` is the dotted name (``ductline.job.completed``)."""

    name: str
    kind: str
    labels: tuple[str, ...]
    description: str
    unit: str = ""

    @property
    def prometheus_name(self) -> str:
        """``ductline_job_completed`` (the exposition adds ``_total``),
        ``ductline_job_runtime_seconds``, ``ductline_jobs_ready``."""
        base = self.name.replace(".", "_")
        return f"{base}_seconds" if self.unit == "s" else base


PIPELINE = ("pipeline",)
STEP = ("pipeline", "step")

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("ductline.pipeline.triggered", COUNTER, PIPELINE, "Runs triggered."),
    MetricSpec("ductline.pipeline.completed", COUNTER, PIPELINE, "Runs that completed."),
    MetricSpec("ductline.pipeline.halted", COUNTER, ("pipeline", "reason"),
               "Runs halted (a step failed for good), by halt reason."),
    MetricSpec("ductline.pipeline.failed", COUNTER, ("pipeline", "reason"),
               "Runs failed by their whole-run deadline."),
    MetricSpec("ductline.pipeline.cancelled", COUNTER, PIPELINE, "Runs cancelled."),
    MetricSpec("ductline.pipeline.runtime", HISTOGRAM, ("pipeline", "result"),
               "Run duration, first attempt start to end, by how the run ended.", "s"),
    MetricSpec("ductline.job.enqueued", COUNTER, STEP, "Step runs (jobs) created."),
    MetricSpec("ductline.job.attempts", COUNTER, ("pipeline", "step", "result"),
               "Attempts that ended, by result (success, error, timed_out, crashed, cancelled)."),
    # The design's name for the same count, kept so existing dashboards keep working;
    # job.attempts says what it counts (an errored attempt is not a completed job).
    MetricSpec("ductline.job.completed", COUNTER, ("pipeline", "step", "result"),
               "Same as ductline.job.attempts (kept for compatibility)."),
    # Failed attempts (error, timeout, crash) by what they cost: a free one came before
    # its step crossed a boundary (ductline.cross_boundary) and is retried as usual; a
    # paid one came after, so its step is not run again and the run halts unsafe_to_retry.
    MetricSpec("ductline.job.failures.free", COUNTER, ("pipeline", "step", "result"),
               "Failed attempts before their step crossed its boundary (retried as usual)."),
    MetricSpec("ductline.job.failures.paid", COUNTER, ("pipeline", "step", "result"),
               "Attempts that ended unsuccessfully after their step crossed its boundary (not retried; the run "
               "halts unsafe_to_retry)."),
    MetricSpec("ductline.job.runtime", HISTOGRAM, ("pipeline", "step", "result"),
               "Attempt duration, claim to recorded outcome.", "s"),
    MetricSpec("ductline.job.pickup_latency", HISTOGRAM, STEP,
               "From a job's not-before time to the start of its attempt.", "s"),
    MetricSpec("ductline.timeout.overrun", HISTOGRAM, STEP,
               "From an attempt's deadline to its child process being gone.", "s"),
    MetricSpec("ductline.thread.undead", COUNTER, STEP, "Thread attempts that could not be stopped."),
    MetricSpec("ductline.process.undead", COUNTER, STEP, "Child processes that survived SIGKILL."),
    MetricSpec("ductline.lease.lost", COUNTER, STEP, "Attempts whose lease was lost to a rescue (killed; a run's stop "
               "counts in job.completed)."),
    MetricSpec("ductline.jobs.ready", GAUGE, PIPELINE, "Pending jobs whose not-before time has passed."),
    MetricSpec("ductline.jobs.delayed", GAUGE, PIPELINE, "Pending jobs waiting for their not-before time."),
    MetricSpec("ductline.jobs.throttled", GAUGE, PIPELINE,
               "Pending jobs waiting for a slot of their step's concurrency limit."),
    # Read from the database, so every worker exports the same values, wherever the
    # runs were triggered (a web app, a script) and whoever ran them.
    MetricSpec("ductline.runs", GAUGE, ("pipeline", "status"),
               "Runs in the database, by status (pruned runs are not counted)."),
    MetricSpec("ductline.runs.triggered", GAUGE, PIPELINE,
               "Runs ever triggered that are still in the database (all statuses)."),
    MetricSpec("ductline.steps.marked_succeeded", COUNTER, STEP,
               "Step runs an operator marked succeeded without running them (ductline mark-succeeded)."),
    MetricSpec("ductline.schedule.runs", COUNTER, ("pipeline", "reason"),
               "Runs started for schedule ticks, by reason: tick (the latest due tick), catch_up (an older "
               "missed tick run after downtime) or backfill."),
    MetricSpec("ductline.events.received", COUNTER, PIPELINE,
               "Events sent to runs and kept (a repeated send with the same key is not counted)."),
    MetricSpec("ductline.events.waiting", GAUGE, PIPELINE,
               "Step runs waiting for an event (deferred: no slot held)."),
    # A queue with ready jobs and no live worker is work nobody will do.
    MetricSpec("ductline.queue.ready", GAUGE, ("queue",), "Pending jobs ready to claim, by queue."),
    MetricSpec("ductline.queue.workers", GAUGE, ("queue",), "Live workers serving the queue."),
    MetricSpec("ductline.jobs.awaiting", GAUGE, PIPELINE,
               "Step runs awaiting their child runs (waiting parents, one row each, no slot)."),
    MetricSpec("ductline.runs.children", GAUGE, PIPELINE,
               "Child runs not yet ended (pending, running or paused), by their own pipeline."),
)

SPECS: dict[str, MetricSpec] = {m.name: m for m in METRICS}
READY = "ductline.jobs.ready"
DELAYED = "ductline.jobs.delayed"
THROTTLED = "ductline.jobs.throttled"
RUNS = "ductline.runs"
RUNS_TRIGGERED = "ductline.runs.triggered"
EVENTS_WAITING = "ductline.events.waiting"
QUEUE_READY = "ductline.queue.ready"
QUEUE_WORKERS = "ductline.queue.workers"
AWAITING = "ductline.jobs.awaiting"
CHILDREN = "ductline.runs.children"

LabelValues = tuple[str, ...]
