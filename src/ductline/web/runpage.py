"""The model of one run's page: its reason to have stopped, its steps and attempts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ductline import timestamps
from ductline.dsl.graph import Definition
from ductline.model import outcomes, serving, stops
from ductline.model.serving import Offer
from ductline.model.states import ACTIVE_RUN, UNFINISHED_RUN, HaltReason, JobStatus, RunStatus
from ductline.web import graph as run_graph
from ductline.web import failures, values
from ductline.web.failures import Failures
from ductline.web.graph import ON_HALT_STEP, RunGraph, Shown, State, job_state

# More step runs than this per step are folded: problems first, then by element.
SHOWN_PER_STEP = 25

HALT_EXPLAINED: dict[str, str] = {
    HaltReason.JOB_RETRIES_EXHAUSTED: "a step failed on every attempt its retry budget (max_retry) allows",
    HaltReason.JOB_CRASHES_EXHAUSTED: "a step's attempts crashed their worker more often than max_crash allows",
    HaltReason.JOB_RELEASES_EXHAUSTED: "a step's attempts were interrupted by a worker's shutdown grace (a deploy, "
                                       "a scale-down) too many times in a row, so it was not started again: it "
                                       "needs more time than the workers' shutdown grace gives it",
    HaltReason.UNSAFE_TO_RETRY: "a step failed after crossing an irreversible boundary, so it was not retried",
    HaltReason.NON_RETRYABLE_ERROR: "a step raised an error its no_retry_on names, returned an output above "
                                    "payload_max_bytes (PayloadTooLarge) or one that does not round-trip through "
                                    "JSON (PayloadNotSerializable) or is not the list its expand needs "
                                    "(ExpandNotAList), or was given arguments its signature cannot take "
                                    "(StepSignatureError), so it was not retried",
    HaltReason.MAX_FANOUT_EXCEEDED: "a step returned more elements than its expand allows (max_fanout)",
    HaltReason.CONDITION_UNMATCHED: "a divert found no route for a step's output",
}


@dataclass(slots=True)
class AttemptView:
    number: int
    result: str
    started_ms: int
    finished_ms: int | None
    deadline_ms: int | None
    worker_id: str | None
    error_type: str | None
    error: str | None
    traceback: str | None
    logs: list[dict[str, Any]] = field(default_factory=list)  # what it logged (`ductline.views.log_entry`)

    @property
    def duration_ms(self) -> int | None:
        return None if self.finished_ms is None else self.finished_ms - self.started_ms


@dataclass(slots=True)
class StepRunView:
    job_id: str
    index: int | None
    scope: str
    state: State
    not_before_ms: int
    created_ms: int
    finished_ms: int | None
    failures: int
    crashes: int
    boundary: str | None
    skip_reason: str | None
    output: str | None
    attempts: list[AttemptView]
    pause_expires_ms: int | None = None  # a paused step run: when its pause expires (None: never)
    skip_root: str | None = None  # a skipped step run: the step whose stop made it unreachable
    failed: Failures = Failures()  # its failed attempts, free and paid
    wait_event: str | None = None  # a deferred step run: the event it waits for
    wait_expires_ms: int | None = None  # ... and when its wait times out (None: never)
    unserved: str | None = None  # pending, and no live worker can claim it: why (`ductline.model.serving`)
    marked: dict[str, Any] | None = None  # completed by an operator's mark: actor, at, reason (`views.marks_by_job`)


@dataclass(slots=True)
class StepView:
    name: str
    label: str
    state: State
    summary: str
    total: int
    runs: list[StepRunView]
    failed: Failures = Failures()  # of all its step runs, shown or not

    @property
    def anchor(self) -> str:
        return "step-" + self.name

    @property
    def hidden(self) -> int:
        return self.total - len(self.runs)

    @property
    def many(self) -> bool:
        """Shown as one row per step run (an expanded step, or several runs of one step)."""
        return self.total > 1 or any(r.index is not None for r in self.runs)

    @property
    def headline(self) -> str:
        if self.many:
            return self.summary
        n = len(self.runs[0].attempts) if self.runs else 0
        return f"{n} attempt{'s' if n != 1 else ''}"


@dataclass(slots=True)
class Reason:
    kind: str  # the run's status (halted, failed, cancelled, paused, running), or "timeout": failed by its deadline
    title: str
    chain: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RunPage:
    run: dict[str, Any]
    metadata: dict[str, Any]
    reason: Reason | None
    steps: list[StepView]
    graph: RunGraph
    now_ms: int
    failed: Failures = Failures()  # the run's failed attempts, free and paid
    declared_events: tuple[str, ...] = ()  # the events its pipeline waits for (when imported here)

    @property
    def status(self) -> str:
        return str(self.run["status"])

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_RUN

    @property
    def can_retry(self) -> bool:
        return self.status == RunStatus.HALTED

    @property
    def unsafe(self) -> bool:
        return bool(self.run["halt_reason"] == HaltReason.UNSAFE_TO_RETRY) or bool(self.crossed)

    @property
    def crossed(self) -> dict[str, str]:
        """``{step: boundary}`` of failed, cancelled or held step runs past a boundary:
        a retry must force each of these steps by name."""
        found: dict[str, str] = {}
        for step in self.steps:
            for r in step.runs:
                if r.boundary and r.state in (JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.HELD):
                    found.setdefault(step.name, r.boundary)
        return found

    @property
    def can_cancel(self) -> bool:
        return self.status in UNFINISHED_RUN

    @property
    def can_resume(self) -> bool:
        return self.status == RunStatus.PAUSED

    @property
    def can_send(self) -> bool:
        """An event can be sent: the run is unfinished and its pipeline waits for
        events (or, not imported here, a step run waits for one now)."""
        return self.status in UNFINISHED_RUN and bool(self.awaited_events)

    @property
    def awaited_events(self) -> list[str]:
        """The events the run's pipeline waits for (those its step runs wait for
        now first), for the send form."""
        waiting = sorted({r.wait_event for step in self.steps for r in step.runs if r.wait_event})
        return waiting + [e for e in self.declared_events if e not in waiting]

    @property
    def delayed_start(self) -> bool:
        return self.status == RunStatus.PENDING and int(self.run["not_before_ms"]) > self.now_ms


def _attempts(rows: list[dict[str, Any]], logs: list[dict[str, Any]]) -> dict[str, list[AttemptView]]:
    by_attempt: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for entry in logs:
        by_attempt.setdefault((entry["job_id"], int(entry["attempt"])), []).append(entry)
    out: dict[str, list[AttemptView]] = {}
    for a in rows:
        out.setdefault(a["job_id"], []).append(AttemptView(
            int(a["attempt"]), outcomes.shown_result(a["result"], a["error_type"]) or JobStatus.RUNNING,
            int(a["started_ms"]),  # no result yet: running
            None if a["finished_ms"] is None else int(a["finished_ms"]),
            None if a["deadline_ms"] is None else int(a["deadline_ms"]), a["worker_id"], a["error_type"],
            a["error"], a["traceback"], by_attempt.get((a["job_id"], int(a["attempt"])), [])))
    for attempts in out.values():
        attempts.sort(key=lambda v: v.number)
    return out


_URGENCY: dict[State, int] = {
    JobStatus.FAILED: 0, JobStatus.PAUSED: 1, JobStatus.RUNNING: 1, JobStatus.AWAITING: 1, JobStatus.HELD: 2,
    Shown.READY: 3, Shown.THROTTLED: 3, Shown.DELAYED: 4, JobStatus.DEFERRED: 4, JobStatus.CANCELLED: 5,
    JobStatus.SKIPPED: 6, JobStatus.COMPLETED: 7,
}


def build(run: dict[str, Any], jobs: list[dict[str, Any]], attempt_rows: list[dict[str, Any]],
          definition: Definition | None, now_ms: int, *, show_all: str | None = None,
          logs: list[dict[str, Any]] | None = None, offers: list[Offer] | None = None,
          marks: dict[str, dict[str, Any]] | None = None) -> RunPage:
    """The run page's model.

    Args:
        run: the `Store.get_run` row; jobs, attempt_rows: its `run_jobs` and `run_attempts`.
        definition: the pipeline's definition when this process imported it.
        now_ms: the database clock.
        show_all: a step whose step runs are all listed (others fold after 25).
        logs: the run's step log records (`ductline.web.reader.Reader.step_logs`).
        offers: what the live workers claim; a ready step run none can claim says why.
        marks: who marked which step run succeeded, by job id (`ductline.views.marks_by_job`):
            such a step run says so instead of its last attempt's error.
    """
    attempts = _attempts(attempt_rows, logs or [])
    graph = run_graph.build(definition, jobs, now_ms)
    by_step: dict[str, list[StepRunView]] = {}
    for j in jobs:
        by_step.setdefault(j["step"], []).append(StepRunView(
            j["id"], j["elem_index"], j["scope"], job_state(j, now_ms), int(j["not_before_ms"]),
            int(j["created_ms"]), j["finished_ms"], int(j["failures"]), int(j["crashes"]), j["boundary"],
            stops.shown_skip_reason(j["status"], j["skip_reason"], j["attempts"]), j["output"], attempts.get(j["id"], []),
            pause_expires_ms=None if j.get("pause_expires_ms") is None or j["status"] != JobStatus.PAUSED
            else int(j["pause_expires_ms"]), skip_root=j.get("skip_root"),
            failed=failures.of_step_run(j, [(a.result, a.error_type, a.error) for a in attempts.get(j["id"], [])]),
            wait_event=j.get("wait_event") if j["status"] == JobStatus.DEFERRED else None,
            wait_expires_ms=None if j.get("pause_expires_ms") is None or j["status"] != JobStatus.DEFERRED
            else int(j["pause_expires_ms"]),
            unserved=serving.unserved(j["step"], j["queue"], j["definition"], offers or [])
            if offers is not None and j["status"] == JobStatus.PENDING and not j["throttled"] else None,
            marked=(marks or {}).get(j["id"]) if j["status"] == JobStatus.COMPLETED else None))
    steps = []
    for node in graph.nodes:
        runs = by_step.get(node.name, [])
        if not runs:
            continue
        runs.sort(key=lambda r: (r.scope.count("/"), r.index if r.index is not None else -1, r.scope))
        shown = runs
        if len(runs) > SHOWN_PER_STEP and show_all != node.name:
            shown = sorted(runs, key=lambda r: _URGENCY.get(r.state, 9))[:SHOWN_PER_STEP]
            shown.sort(key=lambda r: (r.index if r.index is not None else -1, r.scope))
        steps.append(StepView(node.name, node.label, node.state, node.summary, len(runs), shown,
                              failures.total(r.failed for r in runs)))
    # Metadata is ductline's own JSON; a value it cannot read is shown, never a failed page.
    metadata = values.decode(run["metadata"] or "{}")
    if not isinstance(metadata, dict):
        metadata = {"value": metadata}
    failed = failures.total(r.failed for runs in by_step.values() for r in runs)
    declared = tuple(sorted({w.event for w in definition.waits.values()})) if definition is not None else ()
    return RunPage(run, metadata, _reason(run, metadata, by_step), steps, graph, now_ms, failed, declared)


def _said(value: Any) -> str:
    """A metadata value as text (ductline writes plain values; anything else is shown as it is)."""
    return value if isinstance(value, str) else values.text(value, 2_000)


def _skipped(by_step: dict[str, list[StepRunView]], why: str) -> str | None:
    """``"3 step run(s) skipped (why), because of step X."``, or ``None`` when none was."""
    skipped = [r for runs in by_step.values() for r in runs if r.state is JobStatus.SKIPPED]
    if not skipped:
        return None
    roots = sorted({r.skip_root for r in skipped if r.skip_root})
    because = f", because of step {', '.join(roots)}" if roots else ""
    return f"{len(skipped)} step run(s) skipped ({why}){because}."


def _wait_ended(by_step: dict[str, list[StepRunView]], metadata: dict[str, Any], default: str, outcome: str,
                skip_reason: str) -> Reason:
    """Why a run failed when a wait ran out (a pause expired, an event did not come):
    the error recorded (else ``default``), the step runs it cancelled and skipped."""
    chain = [f"The {_said(metadata.get('error') or default)}, so {outcome}."]
    skipped = _skipped(by_step, skip_reason)
    cancelled = sum(1 for runs in by_step.values() for r in runs if r.state is JobStatus.CANCELLED)
    if cancelled:
        chain.append(f"{cancelled} in-flight step run(s) cancelled.")
    if skipped:
        chain.append(skipped)
    return Reason(RunStatus.FAILED, f"Failed: {skip_reason}", chain)


def _halted_before(run: dict[str, Any], metadata: dict[str, Any], by_step: dict[str, list[StepRunView]]) -> str:
    """The line of a run that halted, then passed its deadline while it waited for a
    retry: when and why it halted (the deadline stopped nothing of it in flight)."""
    step = _said(metadata["halted_step"]) if metadata.get("halted_step") else None
    failed = [r for r in by_step.get(str(step), []) if r.state is JobStatus.FAILED and r.attempts] if step else []
    last = failed[-1].attempts[-1] if failed else None
    when = f" at {timestamps.iso(last.finished_ms)}" if last is not None and last.finished_ms else ""
    cause = f" after step {step} failed" if step else ""
    if last is not None and (last.error_type or last.error):
        cause += f" ({last.error_type or 'Error'}: {last.error or ''})".replace(": )", ")")
    return (f"It had halted{when} ({run['halt_reason']}){cause}; "
            f"the deadline then passed while it waited for a retry.")


def _reason(run: dict[str, Any], metadata: dict[str, Any], by_step: dict[str, list[StepRunView]]) -> Reason | None:
    """Why the run stopped, as a chain from the run's status back to the attempt that caused it."""
    status = run["status"]
    if status == RunStatus.HALTED:
        reason = run["halt_reason"] or "unknown"
        chain = [f"Run halted ({reason}): {HALT_EXPLAINED.get(reason, 'see metadata')}."]
        step = _said(metadata["halted_step"]) if metadata.get("halted_step") else None
        failed = [r for r in by_step.get(str(step), []) if r.state is JobStatus.FAILED] if step else []
        for r in failed[:3]:
            where = f"Step {step}" + (f" element {r.index}" if r.index is not None else "")
            results = ", ".join(a.result for a in r.attempts) or "no attempts"
            chain.append(f"{where} failed for good after {len(r.attempts)} attempt(s): {results}.")
            if r.boundary:
                chain.append(f"It had crossed the boundary {r.boundary!r}: retrying it needs a deliberate force.")
            last = r.attempts[-1] if r.attempts else None
            if last is not None and (last.error_type or last.error):
                chain.append(f"Last error: {last.error_type or 'Error'}: {last.error or ''}".rstrip(": "))
        if not failed and metadata.get("error"):
            chain.append(f"Error: {_said(metadata['error'])}")
        handler = by_step.get(ON_HALT_STEP)
        if handler:
            chain.append(f"on_halt handler: {handler[-1].state}.")
        return Reason(RunStatus.HALTED, f"Halted: {reason}", chain)
    if status == RunStatus.FAILED and metadata.get("timeout_exceeded"):
        seconds = _said(metadata.get("timeout_seconds", run["timeout_seconds"]))
        # The deadline's own message (metadata "error") says what the first line says.
        chain = [f"The run deadline of {seconds} s passed."]
        if run["halt_reason"]:
            chain.append(_halted_before(run, metadata, by_step))
        # Only attempts the deadline itself ended: a step that failed on its own
        # step timeout earlier was not in flight.
        stopped = [f"{n}" + (f"[{r.index}]" if r.index is not None else "")
                   for n, runs in by_step.items() for r in runs
                   if r.attempts and r.state is JobStatus.FAILED
                   and stops.stopped_by_deadline(r.attempts[-1].result, r.attempts[-1].error_type,
                                                 r.attempts[-1].error)]
        if stopped:
            chain.append("In-flight attempts stopped: " + ", ".join(stopped[:10])
                         + (f" and {len(stopped) - 10} more" if len(stopped) > 10 else "") + ".")
        skipped = _skipped(by_step, "workflow timeout")
        if skipped:
            chain.append(skipped)
        return Reason("timeout", "Failed: run deadline exceeded", chain)
    if status == RunStatus.FAILED and metadata.get("pause_expired"):
        return _wait_ended(by_step, metadata, "pause expired without a resume", "the run failed closed",
                           "pause expired")
    if status == RunStatus.FAILED and metadata.get("event_timed_out"):
        return _wait_ended(by_step, metadata, "awaited event did not come in time", "the run failed",
                           "event timed out")
    if status == RunStatus.FAILED:
        return Reason(RunStatus.FAILED, "Failed", [_said(metadata.get("error") or "see metadata")])
    if status == RunStatus.RUNNING:
        chain = []
        for name, runs in by_step.items():
            for r in runs:
                if r.state is JobStatus.DEFERRED:
                    chain.append(f"Step {name} is waiting for event {r.wait_event!r}: send it here or with "
                                 f"`ductline send {run['id']} {r.wait_event} [--data JSON]`.")
                    chain.append("Its wait has no timeout." if r.wait_expires_ms is None else
                                 "If the event does not come, the run fails when its wait times out.")
        if chain:
            return Reason(RunStatus.RUNNING, "Running: waiting for an event", chain)
    if status == RunStatus.PAUSED:
        chain = []
        for name, runs in by_step.items():
            for r in runs:
                if r.state is not JobStatus.PAUSED:
                    continue
                where = f"Step {name}" + (f" element {r.index}" if r.index is not None else "")
                chain.append(f"{where} is waiting for a person: resume it here or with "
                             f"`ductline resume {run['id']} [--input JSON]`.")
                chain.append("Its pause has no timeout." if r.pause_expires_ms is None else
                             "If nobody resumes it, the run fails when its pause expires.")
        return Reason(RunStatus.PAUSED, "Paused: waiting for resume", chain)
    if status == RunStatus.CANCELLED:
        chain = []
        for key in ("reason", "cancelled_by", "error"):
            if metadata.get(key):
                chain.append(f"{key.replace('_', ' ')}: {_said(metadata[key])}")
        cancelled = sum(1 for runs in by_step.values() for r in runs if r.state is JobStatus.CANCELLED)
        if cancelled:
            chain.append(f"{cancelled} step run(s) cancelled.")
        skipped = _skipped(by_step, "cancelled")
        if skipped:
            chain.append(skipped)
        return Reason(RunStatus.CANCELLED, "Cancelled", chain)
    return None
