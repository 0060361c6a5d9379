"""The parity harness: run a case through `ductline.execute` and through real
workers, and reduce what each driver recorded to one comparable form.

A record keeps what the rulebook decides and drops what timing decides: the run's
status, halt reason and ``timeout_exceeded`` flag, the keys of the run's result
metadata with the types of their values, and per step run its step, scope, status,
attempt results in order, skip reason (skipped step runs only), skip root and
decoded output. A worker's run is read into the same `WorkflowResult` that
`ductline.execute` returns (`ductline.local.summary`, over the worker's database).
A run's error is kept when it failed, halted or was cancelled: execute's
``metadata["error"]`` against a worker run's `RunHandle.error` (both worded by
`ductline.store.run_errors`), and so are the steps of the run that left a call file
(`parity_app.later_called`: a step the held-job cases require never called).
Timestamps, durations, other error texts, ids and worker names are left out. Long texts are replaced by their length and digest so a diff stays
readable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import hashlib
import json
import logging
import re
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Callable

import parity_app as app

import ductline
from ductline import codec
from ductline.model.outcomes import GIVEN_BACK, RELEASED_TYPE
from ductline.store import Store
from ductline.store import payloads, steplogs
from ductline.store.children import child_runs

log = logging.getLogger("parity")

# Both drivers get the same settings: retries at once unless a step sets a delay, and
# one second between SIGTERM and SIGKILL. The workers' leases are longer than the
# tests' usual 3 s: on a loaded machine a late heartbeat would record a ``crashed``
# attempt the in-process executor (which has no leases) never sees.
SLOTS = 8
EXECUTE_PARALLEL = 3                  # cases run through execute at once
KILL_GRACE_SECONDS = 1
# The workers serve every queue of the corpus (execute runs every queue).
WORKER_ENV = {"DUCTLINE_QUEUES": "default,parity_side", "DUCTLINE_RETRY_DELAY": "0",
              "DUCTLINE_KILL_GRACE_SECONDS": str(KILL_GRACE_SECONDS), "DUCTLINE_LEASE_SECONDS": "15"}
SETTLED_RUN = ("completed", "halted", "failed", "cancelled")
MOVING_JOB = ("pending", "running")   # a settled run with these is still recording
POLL_SECONDS = 0.05                   # between looks at the active runs of a worker
LONG_TEXT = 200                       # characters; longer texts are compared by digest
# A held step (`Case.held`) counts as seen held this long or more before its time, so
# that the run is stopped (or released) well within the hold.
HELD_MARGIN_MS = 2000
# A held case's run is recorded only this long after the held step's time: a held job
# wrongly started then would have been called (`Record.called`) by now.
CALLED_MARGIN_MS = 1500

try:  # the sentinel that keeps a paused step's input
    from ductline.handle import NO_INPUT
except ImportError:  # pragma: no cover - moved by the operations layer
    NO_INPUT = getattr(ductline, "NO_INPUT")


@dataclass(frozen=True)
class Case:
    """One pipeline run the same way through every driver.

    Attributes:
        name: the test id.
        pipeline: the `ductline.Pipeline` (defined in ``parity_app``).
        args: the trigger's arguments.
        status, halt: the run status and halt reason every driver must record.
        cancel_at: cancel the run once an attempt of this step is running.
        cancel_awaiting: cancel the run once this step's job waits for the child
            runs it started (execute: once its attempt ended awaiting them); a
            worker's run is recorded once every child run has ended, each of them
            cancelled (the cancel reaches the children).
        cancel_halted: cancel the run once it halted: on a worker when nothing of it
            runs any more, in execute when the halt holds one of its step runs.
        resume: ``{step: input}`` to resume a paused step with (`NO_INPUT`
            keeps its paused input); ``None`` never resumes.
        events: ``{event: data}`` sent to the run: by a worker case right after
            its trigger (before the run reaches its wait), or once a step run
            waits for it (``events_when_waiting``); execute is given them
            (``execute(events=)``), kept until the wait: the record is the same.
        mark: ``{step: output}`` marked succeeded once the run halted with nothing
            of it running: on a worker through `ductline.operations.mark` (as
            ``ductline mark-succeeded``), by execute through its
            ``mark_succeeded`` option; both apply the engine's one mark.
        slots: worker slots the case may hold at once; cases are triggered only
            while their slots are free, so a sibling that must be running when
            another step fails is not left waiting behind other cases.
        seconds: a rough duration on a worker; the longest cases start first.
        check: extra assertions on the (agreed) record.
        held: a delayed step a worker must be seen holding (claimed, running in
            the database, before its time) while the run is under way; then the
            harness releases the run (`parity_app.gate_path`) and, with
            ``cancel_held``, cancels it. Execute never holds jobs: it does the same
            once the step that leads to ``held`` ended (the held step's job then
            waits for its time). A worker's run is recorded once the held step's time
            has passed, so that a held job started despite its run's stop shows.
    """

    name: str
    pipeline: Any
    args: tuple[Any, ...]
    status: str
    halt: str | None = None
    cancel_at: str | None = None
    cancel_halted: bool = False
    cancel_awaiting: str | None = None
    resume: dict[str, Any] | None = None
    events: dict[str, Any] | None = None
    events_when_waiting: bool = False
    mark: dict[str, Any] | None = None
    slots: int = 1
    seconds: float = 0.0
    check: Callable[["Record"], None] | None = None
    held: str | None = None
    cancel_held: bool = False


@dataclass(frozen=True)
class StepRecord:
    """One step run as compared: its attempts' results in order, the skip reason of
    a skipped run only (a failed paused step keeps its expiry there on a worker),
    and its output decoded (`plain`)."""

    step: str
    scope: str
    status: str
    attempts: tuple[str, ...]
    skip_reason: str | None
    skip_root: str | None
    output: Any
    # Per attempt, what it logged: (level, logger, message) in order (times differ).
    logs: tuple[tuple[tuple[str, str, str], ...], ...] = ()
    errors: tuple[str, ...] = ()  # the error types of its errored attempts, in order

    def sort_key(self) -> tuple[Any, ...]:
        # Element order within a step ("2" before "10"); a scope that is not a path
        # of element indexes sorts last, by its text.
        parts = self.scope.split("/") if self.scope else []
        if all(p.isdigit() for p in parts):
            return (self.step, 0, tuple(int(p) for p in parts), self.scope)
        return (self.step, 1, (), self.scope)

    def line(self) -> str:
        where = f"{self.step}[{self.scope}]" if self.scope else self.step
        return (f"{where}: {self.status} attempts={list(self.attempts)} skip_reason={self.skip_reason!r} "
                f"skip_root={self.skip_root!r} output={self.output!r}"
                + (f" logs={[list(a) for a in self.logs]!r}" if any(self.logs) else "")
                + (f" errors={list(self.errors)}" if self.errors else ""))


@dataclass(frozen=True)
class Record:
    """A run as compared: its step runs sorted by step, then element order."""

    status: str
    halt_reason: str | None
    timeout_exceeded: bool
    steps: tuple[StepRecord, ...] = field(default=())
    metadata: tuple[tuple[str, str], ...] = ()  # (key, type of its value) of the result metadata
    spans: tuple[str, ...] = ()  # the run's spans, one line each (`span_lines`)
    # The error of a failed, halted or cancelled run: execute's ``metadata["error"]``;
    # for a worker, `RunHandle.error`, what `RunFailed` says.
    error: str | None = None
    called: tuple[str, ...] = ()  # the steps of the run that left a call file (`parity_app.later_called`)

    def lines(self) -> list[str]:
        head = [f"run: {self.status} halt_reason={self.halt_reason!r} timeout_exceeded={self.timeout_exceeded}",
                f"metadata: {dict(self.metadata)}", f"error: {self.error!r}", f"called: {list(self.called)}"] + [f"span {line}" for line in self.spans]
        return head + [s.line() for s in self.steps]

    def step(self, name: str, scope: str = "") -> StepRecord:
        for s in self.steps:
            if (s.step, s.scope) == (name, scope):
                return s
        raise KeyError(f"no step run {name}[{scope}] in {self.lines()}")


def plain(value: Any) -> Any:
    """A value as compared: long texts become their length and digest."""
    if isinstance(value, str) and len(value) > LONG_TEXT:
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return f"<text of {len(value)} characters, sha256 {digest}>"
    if isinstance(value, ductline.ChildRunFailed):  # a child run's id is each driver's own
        return dataclasses.replace(value, run_id="<child run>")
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _text(value: Any) -> str | None:
    """An enum or string state as its string value."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


def make_record(status: Any, halt_reason: Any, timeout_exceeded: Any, steps: list[StepRecord],
                metadata: dict[str, Any] | None = None, spans: list[tuple[str, dict[str, Any]]] | None = None,
                error: Any = None, run_id: str | None = None) -> Record:
    """``error``: the run's error (`Record.error`), kept for a failed, halted or cancelled
    run; ``run_id``: the run whose call files (`Record.called`) are read."""
    status_text = _text(status) or ""
    return Record(status_text, _text(halt_reason), bool(timeout_exceeded),
                  tuple(sorted(steps, key=StepRecord.sort_key)), metadata_types(metadata or {}),
                  span_lines(spans or []),
                  _without_run_ids(_text(error)) if status_text in ("failed", "halted", "cancelled") else None,
                  called_steps(run_id) if run_id else ())


def called_steps(run_id: str) -> tuple[str, ...]:
    """The steps of run ``run_id`` that left a call file (`parity_app.later_called`)."""
    folder = app.gate_path(run_id, "called").parent
    prefix = f"{run_id}.called."
    return tuple(sorted(p.name[len(prefix):] for p in folder.glob(prefix + "*")))


def leads_to(definition: Any, step: str, target: str) -> bool:
    """Whether ``step``'s transition creates ``target``."""
    node = definition.nodes.get(step)
    return node is not None and node.next is not None and target in node.next.targets


def _without_run_ids(text: str | None) -> str | None:
    """An error text with every run id (a child run's, each driver's own) as ``<run id>``."""
    return None if text is None else re.sub(r"\b[0-9a-f]{32}\b", "<run id>", text)


def span_lines(spans: list[tuple[str, dict[str, Any]]]) -> tuple[str, ...]:
    """A run's spans as compared: the run span(s) with their result, error type and
    deadline flag; each attempt span with its step, attempt number, result and error
    type (`ductline.observability.tracing`, the OpenTelemetry CI/CD conventions)."""
    lines = []
    for name, attrs in spans:
        if "cicd.pipeline.task.name" in attrs:
            lines.append(f"{attrs['cicd.pipeline.task.name']}#{attrs.get('ductline.attempt')}: "
                         f"{attrs.get('cicd.pipeline.task.run.result')} error.type={attrs.get('error.type')}")
        else:
            lines.append(f"{name}: {attrs.get('cicd.pipeline.result')} error.type={attrs.get('error.type')} "
                         f"timeout_exceeded={attrs.get('workflow.timeout_exceeded')}")
    return tuple(sorted(lines))


# Keys of the result metadata whose values time decides (the types still count).
def metadata_types(metadata: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The result metadata as compared: each key with the type of its value."""
    return tuple(sorted((key, type(value).__name__) for key, value in metadata.items()))


def step_record(step: str, scope: str, status: Any, attempts: list[Any], skip_reason: Any, skip_root: Any,
                output: Any, logs: list[list[tuple[str, str, str]]] | None = None,
                errors: list[Any] | None = None) -> StepRecord:
    """``attempts`` are results in order; ``logs`` and ``errors`` what the same attempts
    logged and the error types they raised."""
    status_text = _text(status) or ""
    results = tuple(_text(a) or "" for a in attempts)
    error_types = tuple(_text(e) or "" for r, e in zip(results, errors or [None] * len(results))
                        if r == "errored")
    return StepRecord(step, scope or "", status_text, results,
                      _text(skip_reason) if status_text == "skipped" else None, _text(skip_root),
                      plain(output), tuple(tuple(a) for a in (logs or [])), error_types)


# -- the in-process executor -------------------------------------------------------------------
def run_execute(case: Case) -> Any:
    """Run ``case`` in process, with the workers' settings; ``(WorkflowResult, spans)``,
    the spans as ``(name, attributes)`` of an in-memory exporter.

    A plain case goes through `ductline.execute`. A case that cancels, or that
    leaves a pause without a timeout unresumed (only its run deadline ends it),
    goes through `ductline.local.start`, which `execute` is made of: the cancel is
    sent from ``on_update`` when an attempt of the step starts, as the harness
    cancels a worker's run once the step's job is running.
    """
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        result = _run_execute(case, provider)
    finally:
        provider.shutdown()
    return result, [(span.name, dict(span.attributes or {})) for span in exporter.get_finished_spans()]


def _run_execute(case: Case, provider: Any) -> Any:
    options: dict[str, Any] = {"retry_delay": 0, "kill_grace": KILL_GRACE_SECONDS, "concurrency": SLOTS,
                               "tracer_provider": provider}
    if case.resume is not None:
        options["resume"] = dict(case.resume)
    if case.events is not None:
        options["events"] = dict(case.events)
    if case.mark is not None:
        options["mark_succeeded"] = dict(case.mark)
    pauses = case.pipeline.definition().pauses
    waits_forever = any(timeout is None and step not in (case.resume or {}) for step, timeout in pauses.items()) \
        or any(w.timeout is None and w.event not in (case.events or {})
               for w in getattr(case.pipeline.definition(), "waits", {}).values())
    if (case.cancel_at is None and case.held is None and not case.cancel_halted and case.cancel_awaiting is None
            and not waits_forever):
        return ductline.execute(case.pipeline, *case.args, **options)
    from ductline import local

    async def started() -> Any:
        holder: dict[str, Any] = {}

        def on_update(event: dict[str, Any]) -> None:
            if (case.cancel_at is not None and event.get("type") == "step_start"
                    and event.get("step") == case.cancel_at and "run" in holder and not holder.get("sent")):
                holder["sent"] = True
                holder["run"].cancel()
            if ((case.cancel_halted and event.get("type") == "step_held"
                 or case.cancel_awaiting is not None and event.get("type") == "step_end"
                 and event.get("step") == case.cancel_awaiting and event.get("status") == "awaiting")
                    and "run" in holder and not holder.get("sent")):
                holder["sent"] = True
                holder["run"].cancel()
            if (case.held is not None and event.get("type") == "step_end" and event.get("status") == "completed"
                    and leads_to(case.pipeline.definition(), str(event.get("step")), case.held)
                    and "run" in holder and not holder.get("released")):
                holder["released"] = True  # the held step's job now waits for its time
                app.gate_path(holder["run"].id, "release").touch()
                if case.cancel_held:
                    holder["run"].cancel()

        run = local.start(case.pipeline, *case.args, on_update=on_update, **options)
        holder["run"] = run
        result = await run.result()
        if case.cancel_at is not None:
            assert holder.get("sent"), f"step {case.cancel_at!r} never started, so the run was not cancelled"
        if case.held is not None:
            assert holder.get("released"), f"the step before {case.held!r} never completed"
        if case.cancel_halted:
            assert holder.get("sent"), "the run never halted holding a step run, so it was not cancelled"
        if case.cancel_awaiting is not None:
            assert holder.get("sent"), f"step {case.cancel_awaiting!r} never awaited child runs, so the run was not cancelled"
        return result

    return asyncio.run(started())


class LocalRuns:
    """Runs cases through `run_execute`, a few at a time, each in a thread with its
    own event loop: the ``upfront`` cases from the start of the session (so the
    executor's child start-ups overlap with each other and with the workers'
    runs), any other case when its result is asked for."""

    def __init__(self, upfront: list[Case], parallel: int) -> None:
        self._pool = ThreadPoolExecutor(parallel, thread_name_prefix="parity-execute")
        self._futures: dict[str, Future[Any]] = {
            case.name: self._pool.submit(run_execute, case) for case in sorted(upfront, key=lambda c: -c.seconds)}

    def result(self, case: Case, timeout: float = 90.0) -> Any:
        """The `WorkflowResult` of ``case`` (what `run_execute` raised, raised again)."""
        future = self._futures.get(case.name)
        if future is None:
            return run_execute(case)
        try:
            return future.result(timeout)
        except FutureTimeout:
            raise AssertionError(f"execute: case {case.name!r} has not finished after {timeout} s") from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def from_execute(found: Any) -> Record:
    """The record of a `run_execute` result: a `WorkflowResult` and its spans."""
    result, spans = found
    metadata = dict(getattr(result, "metadata", None) or {})
    status = getattr(result, "status", None) or getattr(result, "overall_status", None)
    steps = []
    for s in result.steps:
        history = getattr(s, "history", None) or ()
        steps.append(step_record(s.step, getattr(s, "scope", "") or "", s.status,
                                 [getattr(h, "result", None) for h in history], s.skip_reason,
                                 getattr(s, "skip_root", None), s.output,
                                 [[(e.level, e.logger, e.message) for e in getattr(h, "logs", ())] for h in history],
                                 [getattr(h, "error_type", None) for h in history]))
    return make_record(status, metadata.get("halt_reason"), metadata.get("timeout_exceeded"), steps, metadata,
                       spans, metadata.get("error"), metadata.get("run_id"))


# -- a worker ------------------------------------------------------------------------------------
def from_store(store: Store, run_id: str, definition: Any = None, spans: Any = None) -> Record:
    """The record of run ``run_id`` as a worker left it in the database; with the
    run's ``definition``, its result metadata as `ductline.execute` would return it;
    with ``spans`` (a callable that returns the spans a collector got, once they are
    all there), the run's spans as the worker exported them."""
    run = store.get_run(run_id)
    assert run is not None, f"run {run_id} not found"
    metadata = run["metadata"]
    if isinstance(metadata, str):
        metadata = json.loads(metadata or "{}")
    attempts: dict[str, list[tuple[int, str, str | None]]] = {}
    for a in store.run_attempts(run_id):
        attempts.setdefault(a["job_id"], []).append((a["attempt"], a["result"], a["error_type"]))
    logs: dict[tuple[str, int], list[tuple[str, str, str]]] = {}
    for entry in steplogs.of_run(store.dialect, run_id):
        logs.setdefault((entry.job_id, entry.attempt), []).append((entry.level, entry.logger, entry.message))
    steps = []
    for job in store.run_jobs(run_id):
        output = None if job["output"] is None else codec.loads(payloads.load(store, run_id, job["output"]))
        ordered = sorted(attempts.get(job["id"], []), key=lambda a: a[0])
        steps.append(step_record(job["step"], job["scope"], job["status"], [r for _, r, _ in ordered],
                                 job["skip_reason"], job["skip_root"], output,
                                 [logs.get((job["id"], n), []) for n, _, _ in ordered], [e for _, _, e in ordered]))
    result_metadata = None
    if definition is not None:
        from ductline.local.summary import workflow_result

        result_metadata = workflow_result(store, definition, run_id, 0.0).metadata
    began = sum(1 for a in store.run_attempts(run_id)
                if not (a["error_type"] == RELEASED_TYPE and (a["error"] or "").startswith(GIVEN_BACK)))
    return make_record(run["status"], run["halt_reason"], (metadata or {}).get("timeout_exceeded"), steps,
                       result_metadata,
                       None if spans is None else spans(run_id, began, bool((metadata or {}).get("timeout_exceeded")),
                                                        run["status"] == "completed", run["status"] != "cancelled"),
                       ductline.RunHandle(run_id, store).error, run_id)


def exported_spans(receiver: Any, timeout: float = 15.0) -> Callable[..., list[tuple[str, dict[str, Any]]]]:
    """``spans(run_id, attempts, timed_out, completed, run_span)``: the spans of a run a
    worker exported to ``receiver`` (`otlp_support.Receiver`), once every attempt of
    the run that began (``attempts``) has its span and, unless ``run_span`` is false, a
    run span came -- without ``run_span`` (a cancelled run: its run span is the
    canceller's, here the test process, which exports none, and `compare` leaves run
    spans out of a cancel case), the attempt spans alone are waited for; with ``timed_out``
    (the run ended at its deadline), the deadline's run span, which a run halted
    before its deadline sends after the halt's, maybe in a later batch; with
    ``completed``, the completion's, which a run halted and then marked succeeded
    sends after the halt's -- or, after ``timeout`` seconds, what came by then (a span
    the worker never exported shows as a difference from execute's, not as a harness
    error)."""

    def spans(run_id: str, attempts: int, timed_out: bool = False,
              completed: bool = False, run_span: bool = True) -> list[tuple[str, dict[str, Any]]]:
        def found() -> list[tuple[str, dict[str, Any]]]:
            with receiver.lock:
                return [(name, attrs) for name, attrs in receiver.spans
                        if attrs.get("cicd.pipeline.run.id") == run_id]

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = found()
            tasks = sum(1 for _, attrs in got if "cicd.pipeline.task.name" in attrs)
            runs = [attrs for _, attrs in got if "cicd.pipeline.task.name" not in attrs]
            deadline_span = any(attrs.get("workflow.timeout_exceeded") for attrs in runs)
            completion_span = any(attrs.get("cicd.pipeline.result") == "success" for attrs in runs)
            if tasks >= attempts and (runs or not run_span) and (deadline_span or not timed_out) \
                    and (completion_span or not completed):
                break
            time.sleep(POLL_SECONDS)  # a collector is polled: its batches come when they come
        return found()

    return spans


@dataclass
class _Active:
    case: Case
    handle: Any
    cancelled: bool = False
    resumed: bool = False
    sent: bool = False
    marked: bool = False
    held_until_ms: int | None = None  # the held step's time, once it was seen held (`Case.held`)


class Fleet:
    """One worker process on one database, driving cases in a thread of its own.

    The thread triggers the ``upfront`` cases, longest first, and any case asked
    for with `want` ahead of them, while their slots fit in the worker's; it sends
    the cancels and resumes a case asks for, and records each run once it has
    settled (a halted run once nothing of it is still running or ready to run).
    """

    def __init__(self, backend: str, url: str, store: Store, proc: subprocess.Popen[bytes],
                 upfront: list[Case], spans: Any = None) -> None:
        self.backend = backend
        self.url = url
        self.store = store
        self.proc = proc
        self.spans = spans  # `exported_spans` of the collector the worker exports to
        self._waiting = sorted(upfront, key=lambda c: -c.seconds)
        self._wanted: list[Case] = []
        self.records: dict[str, Record | BaseException] = {}
        self.run_ids: dict[str, str] = {}
        self.timings: dict[str, tuple[float, float]] = {}  # case: (triggered, settled), since start
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drive, name=f"parity-{backend}", daemon=True)
        self.started = time.monotonic()
        self.finished: float | None = None
        self.failure: BaseException | None = None  # what stopped the thread

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def want(self, case: Case) -> None:
        """Trigger ``case`` next, unless it was triggered already."""
        with self._changed:
            if case.name not in self.run_ids and case.name not in self.records:
                self._wanted.append(case)

    def record(self, case: Case, timeout: float = 90.0) -> Record:
        """The record of ``case`` once its run settled on this worker."""
        self.want(case)
        name = case.name
        with self._changed:
            self._changed.wait_for(
                lambda: name in self.records or self.failure is not None or self.proc.poll() is not None, timeout)
            if name not in self.records:
                why = (f"the worker exited with code {self.proc.returncode}" if self.proc.poll() is not None
                       else f"the harness thread stopped: {self.failure!r}" if self.failure is not None
                       else f"its run is still moving after {timeout} s")
                raise AssertionError(f"{self.backend} worker: no record of case {name!r}: {why}"
                                     + self._describe(name))
            found = self.records[name]
        if isinstance(found, BaseException):
            raise AssertionError(f"{self.backend} worker: case {name!r} failed in the harness: {found!r}")
        return found

    def _describe(self, name: str) -> str:
        run_id = self.run_ids.get(name)
        if run_id is None:
            return " (not triggered)"
        try:
            run = self.store.get_run(run_id)
            jobs = [(j["step"], j["scope"], j["status"]) for j in self.store.run_jobs(run_id)]
        except Exception as exc:  # pragma: no cover - diagnostics only
            return f" (run {run_id}: {exc!r})"
        return f" (run {run_id} is {run and run['status']}; jobs {jobs})"

    def _publish(self, name: str, value: Record | BaseException) -> None:
        with self._changed:
            self.records[name] = value
            self._changed.notify_all()

    def _drive(self) -> None:
        waiting = self._waiting
        active: dict[str, _Active] = {}
        try:
            while not self._stop.is_set():
                with self._changed:
                    wanted, self._wanted = self._wanted, []
                names = {c.name for c in wanted}
                waiting[:] = wanted + [c for c in waiting if c.name not in names]
                used = sum(a.case.slots for a in active.values())
                while waiting and used + waiting[0].slots <= SLOTS:
                    case = waiting.pop(0)
                    if case.name in self.run_ids:
                        continue
                    try:
                        handle = case.pipeline.trigger(*case.args, database=self.store)
                    except Exception as exc:
                        self._publish(case.name, exc)
                        continue
                    self.run_ids[case.name] = handle.id
                    self.timings[case.name] = (time.monotonic() - self.started, 0.0)
                    active[case.name] = _Active(case, handle)
                    if case.events is not None and not case.events_when_waiting:
                        for event, data in case.events.items():  # kept until the run reaches its wait
                            handle.send(event, data)
                        active[case.name].sent = True
                    used += case.slots
                for name, item in list(active.items()):
                    try:
                        settled = self._step(item)
                    except Exception as exc:
                        log.exception("parity case %s on %s", name, self.backend)
                        settled = exc
                    if settled is not None:
                        del active[name]
                        self.timings[name] = (self.timings[name][0], time.monotonic() - self.started)
                        self._publish(name, settled)
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the {self.backend} worker exited with code {self.proc.returncode}")
                self._stop.wait(POLL_SECONDS)
        except BaseException as exc:
            self.failure = exc
            for item in active.values():
                self._publish(item.case.name, exc)
            for case in waiting:
                self._publish(case.name, exc)
        finally:
            self.finished = time.monotonic()

    def _held(self, run_id: str, step: str) -> int | None:
        """The time (epoch ms) of ``step``'s job if this worker's fleet holds it well
        before it: claimed (running) with `HELD_MARGIN_MS` or more to go."""
        now_ms = self.store.now_ms()
        for job in self.store.run_jobs(run_id):
            if (job["step"] == step and job["status"] == "running"
                    and now_ms < int(job["not_before_ms"]) - HELD_MARGIN_MS):
                return int(job["not_before_ms"])
        return None

    def _step(self, item: _Active) -> Record | None:
        """Act on one active run; its record once it has settled."""
        case = item.case
        run = self.store.get_run(item.handle.id)
        assert run is not None
        status = run["status"]
        if case.held is not None and item.held_until_ms is None:
            if status in SETTLED_RUN:
                raise AssertionError(f"run {item.handle.id} settled {status} before step {case.held!r} "
                                     "was seen held")
            item.held_until_ms = self._held(item.handle.id, case.held)
            if item.held_until_ms is not None:
                app.gate_path(item.handle.id, "release").touch()
                if case.cancel_held:
                    item.handle.cancel()
            return None
        if case.cancel_awaiting is not None and not item.cancelled and status not in SETTLED_RUN:
            jobs = self.store.run_jobs(item.handle.id)
            if any(j["step"] == case.cancel_awaiting and j["status"] == "awaiting" for j in jobs):
                item.handle.cancel()
                item.cancelled = True
            return None
        if case.cancel_at is not None and not item.cancelled and status not in SETTLED_RUN:
            jobs = self.store.run_jobs(item.handle.id)
            if any(j["step"] == case.cancel_at and j["status"] == "running" for j in jobs):
                item.handle.cancel()
                item.cancelled = True
            return None
        if case.events is not None and not item.sent and status not in SETTLED_RUN:
            waiting = {j["wait_event"] for j in self.store.run_jobs(item.handle.id) if j["status"] == "deferred"}
            if waiting:
                for event in sorted(waiting & set(case.events)):
                    item.handle.send(event, case.events[event])
                item.sent = True
                return None
        if case.resume is not None and not item.resumed and status == "paused":
            # One resume resumes every paused step run of the run, with one input.
            (value,) = case.resume.values()
            if value is NO_INPUT:
                item.handle.resume()
            else:
                item.handle.resume(input=value)
            item.resumed = True
            return None
        if status not in SETTLED_RUN:
            return None
        if any(j["status"] in MOVING_JOB for j in self.store.run_jobs(item.handle.id)):
            return None  # halted, and a sibling (or the on_halt handler) is still running
        if case.mark is not None and not item.marked and status == "halted":
            from ductline.operations.mark import mark_succeeded

            for step, output in case.mark.items():
                mark_succeeded(self.store, case.pipeline.definition(), item.handle.id, step, output, actor="parity")
            item.marked = True
            return None
        if case.cancel_halted and not item.cancelled:
            if status != "halted":
                raise AssertionError(f"run {item.handle.id} settled {status} instead of halting")
            item.handle.cancel()
            item.cancelled = True
            return None
        if case.cancel_at is not None and not item.cancelled:
            raise AssertionError(f"run {item.handle.id} settled {status} before step {case.cancel_at!r} ran")
        if case.cancel_awaiting is not None:
            if not item.cancelled:
                raise AssertionError(f"run {item.handle.id} settled {status} before step "
                                     f"{case.cancel_awaiting!r} awaited its child runs")
            with self.store.dialect.reader() as session:
                children = [str(r["status"]) for r in child_runs(session, item.handle.id)]
            if any(c not in SETTLED_RUN for c in children):
                return None  # the cancel reaches them in transactions of their own
            assert children and set(children) == {"cancelled"}, f"child runs ended {children}"
        if item.held_until_ms is not None and self.store.now_ms() < item.held_until_ms + CALLED_MARGIN_MS:
            return None  # a held job started at its time despite the stop would show by then
        return from_store(self.store, item.handle.id, case.pipeline.definition(), self.spans)


# -- comparing -------------------------------------------------------------------------------------
def compare(case: Case, records: dict[str, Record]) -> None:
    """Assert every driver recorded the same, and what the case expects.

    Raises:
        AssertionError: with a unified diff of each driver that disagrees with the
            first one.
    """
    if case.cancel_at is not None or case.cancel_held or case.cancel_halted or case.cancel_awaiting is not None:
        # A cancel's run span is emitted by the process that cancels (the caller's
        # tracing): execute's caller is the executor itself, a worker run's canceller
        # here is the test process, which exports none. Attempt spans still count.
        records = {name: dataclasses.replace(r, spans=tuple(line for line in r.spans if not line.startswith("RUN ")))
                   for name, r in records.items()}
    names = list(records)
    base_name = names[0]
    base = records[base_name]
    problems = []
    for name in names[1:]:
        other = records[name]
        if other != base:
            diff = "\n".join(difflib.unified_diff(base.lines(), other.lines(), base_name, name, lineterm=""))
            problems.append(diff)
    if problems:
        raise AssertionError(f"case {case.name}: the drivers disagree\n" + "\n\n".join(problems)
                             + "\n\nrecorded by " + base_name + ":\n" + "\n".join(base.lines()))
    assert (base.status, base.halt_reason) == (case.status, case.halt), (
        f"case {case.name}: every driver recorded {base.status}/{base.halt_reason}, expected "
        f"{case.status}/{case.halt}:\n" + "\n".join(base.lines()))
    if case.check is not None:
        case.check(base)
