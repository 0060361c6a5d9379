"""OpenTelemetry spans for in-process runs, when ``opentelemetry`` is installed
(the ``otel`` extra); without it every call here does nothing.

One span per run (``RUN <pipeline>``, kind SERVER, as the OpenTelemetry CI/CD
conventions name pipeline runs) and one per attempt (named for its step, INTERNAL,
a child of the run span), with the CI/CD attribute names and the ``workflow.*``
names -- the same spans a worker emits. Their ids are derived from the run id exactly as
`ductline.observability.tracing` derives them, so a step running in a child
process (which restores its attempt's context from those ids) nests its own spans
under its attempt, and a retry links to the attempt before it.
"""

from __future__ import annotations

from typing import Any, Callable

from ductline.model.states import AttemptResult
from ductline.observability.tracing import RUN_ACTION, run_span_name, task_span_name

# An attempt's result as the CI/CD conventions' ``cicd.pipeline.task.run.result``.
RESULTS = {AttemptResult.SUCCEEDED: "success", AttemptResult.ERRORED: "failure",
           AttemptResult.TIMED_OUT: "timeout", AttemptResult.CRASHED: "error",
           AttemptResult.CANCELLED: "cancellation"}


class Tracing:
    """Spans of one run; ``enabled`` is false without opentelemetry."""

    def __init__(self, provider: Any = None) -> None:
        try:
            from opentelemetry import context, trace

            from ductline.observability import tracing as derived
        except ImportError:
            self._trace: Any = None
            return
        self._trace = trace
        self._context = context
        self._derived = derived
        self._spans = derived.TracingSubscriber(tracer_provider=provider)  # starts spans with derived ids

    @property
    def enabled(self) -> bool:
        return self._trace is not None

    def start_run(self, pipeline: str, run_id: str) -> Any:
        if self._trace is None:
            return None
        return self._spans._start(
            run_span_name(pipeline), trace_id=self._derived.trace_id_for(run_id),
            span_id=self._derived.run_span_id(run_id), context=self._context.Context(),
            kind=self._trace.SpanKind.SERVER,
            attributes={"cicd.pipeline.name": pipeline, "cicd.pipeline.run.id": run_id,
                        "cicd.pipeline.action.name": RUN_ACTION})

    def end_run(self, span: Any, result: str, *, error_type: str | None = None,
                error: str | None = None, timeout_seconds: float | None = None) -> None:
        """``result``: ``success``, ``failure``, ``timeout`` or ``cancellation``."""
        if span is None:
            return
        span.set_attribute("cicd.pipeline.result", result)
        if result == "timeout":
            span.set_attribute("workflow.timeout_exceeded", True)
            span.add_event("workflow.timeout", {"workflow.timeout_seconds": timeout_seconds or 0})
        if error_type:
            span.set_attribute("error.type", error_type)
        if result != "success":
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error))
        span.end()

    def start_attempt(self, run_span: Any, pipeline: str, run_id: str, step: str, job_id: str,
                      attempt: int, index: int | None) -> Any:
        if run_span is None:
            return None
        attributes: dict[str, Any] = {
            "cicd.pipeline.name": pipeline, "cicd.pipeline.run.id": run_id,
            "cicd.pipeline.task.name": step, "cicd.pipeline.task.run.id": f"{job_id}/{attempt}",
            "ductline.job_id": job_id, "ductline.attempt": attempt,
        }
        if index is not None:
            attributes["ductline.element_index"] = index
        links = []
        if attempt > 1:
            links.append(self._trace.Link(self._derived.attempt_span_context(run_id, job_id, attempt - 1),
                                          {"ductline.link": "previous_attempt"}))
        return self._spans._start(
            task_span_name(step), trace_id=None, span_id=self._derived.attempt_span_id(job_id, attempt),
            context=self._trace.set_span_in_context(run_span), kind=self._trace.SpanKind.INTERNAL,
            attributes=attributes, links=links)

    def end_attempt(self, span: Any, result: AttemptResult, error_type: str | None = None,
                    error: str | None = None) -> None:
        if span is None:
            return
        span.set_attribute("cicd.pipeline.task.run.result", RESULTS[result])
        if error_type:
            span.set_attribute("error.type", error_type)
        if result is not AttemptResult.SUCCEEDED:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, error))
        span.end()

    def enter(self, span: Any) -> Callable[[], Any] | None:
        """A function that makes ``span`` current in the context it runs in (for
        steps that run in this process, so their own spans nest under it)."""
        if span is None:
            return None
        ctx = self._trace.set_span_in_context(span)
        return lambda: self._context.attach(ctx)
