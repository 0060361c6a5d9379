"""The JSON API: the same reads as the pages, plus starting, retrying, cancelling and
resuming runs with ``Authorization: Bearer <DUCTLINE_DASHBOARD_TOKEN>``.

The OpenAPI schema at ``/api/openapi.json`` is built from the routes' docstrings
(first paragraph: summary, the rest: description) and their ``openapi`` details.
"""

from __future__ import annotations

import inspect
import json
import math
from datetime import datetime
from typing import Any, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.schemas import SchemaGenerator

from ductline import views
from ductline.errors import DefinitionError, InvalidStateError, PayloadTooLarge, PipelineNotFound
from ductline.model import workers as worker_rule
from ductline.model.states import JobStatus
from ductline.observability import probes
from ductline.safetext import printable
from ductline.web import events, runview, start
from ductline.web.app import dashboard
from ductline.web.charts import WINDOWS, Point
from ductline.web.graph import Shown
from ductline.web.reader import MAX_PAGE, STATUSES, BadQuery, check_tag_filter
from ductline.web.runview import Data


def _shown(content: Any, depth: int = 0) -> Any:
    """Every string of an answer made safe to show (`ductline.safetext.printable`),
    except inside `Data` (values, whose strings are data, already made storable)."""
    if isinstance(content, str):
        return printable(content)
    if isinstance(content, dict):
        return {printable(str(k), newlines=False): _shown(v, depth + 1) for k, v in content.items()}
    if isinstance(content, (list, tuple)):
        return [_shown(v, depth + 1) for v in content]
    if isinstance(content, Data):
        return content.value
    if isinstance(content, float) and not math.isfinite(content):
        return repr(content)
    return content


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


class ApiResponse(JSONResponse):
    """JSON whose every string is safe to show; values (`Data`) are given as
    `ductline.web.values.api_value` makes them. The body is ASCII (every other
    character escaped, as JSON allows), so not even a value's data can put a control
    character on the terminal that prints it."""

    def render(self, content: Any) -> bytes:
        return json.dumps(_shown(content), ensure_ascii=True, separators=(",", ":"), default=_plain).encode()


def json_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return ApiResponse({"error": message, "status": status}, status, headers=headers)


def openapi(**details: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def attach(func: Callable[..., Any]) -> Callable[..., Any]:
        setattr(func, "openapi", details)
        return func
    return attach


def _query(name: str, description: str, kind: str = "string", **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": {"type": kind, **extra}}


def _path(name: str) -> dict[str, Any]:
    described = {"description": "a full run id or a unique prefix of at least 6 characters, as the CLI takes; "
                                "404 names the runs an ambiguous prefix matches"} if name == "run_id" else {}
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}, **described}


def _refused(request: Request) -> Response | None:
    """401/403 unless the request carries the dashboard's token as a bearer token."""
    d = dashboard(request)
    if not d.access.enabled:
        return json_error(403, "the dashboard is read-only: DUCTLINE_DASHBOARD_TOKEN is not set where it runs")
    if not d.access.bearer(request):
        return json_error(401, "missing or wrong token: send Authorization: Bearer <DUCTLINE_DASHBOARD_TOKEN>",
                          {"WWW-Authenticate": 'Bearer realm="ductline"'})
    return None


async def _run_id(request: Request) -> str:
    """The full id of the run the path names: a full id or a unique prefix of at
    least 6 characters, as the CLI and the dashboard's pages take it (one rule:
    `ductline.views.resolve_run_id`).

    Raises:
        RunNotFound: no run, or several runs, start with it (404, saying which).
    """
    return await run_in_threadpool(dashboard(request).reader.existing, request.path_params["run_id"])


def _summaries(request: Request, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    reasons = dashboard(request).reader.run_reasons(rows)
    return [{**views.run_summary(r, reasons.get(r["id"])), "started_at": views.iso(r["started_ms"])} for r in rows]


@openapi(responses={"200": {"description": "runs by status, jobs ready/delayed/running, pipelines, last_hour"}})
def overview(request: Request) -> Response:
    """Counts of runs by status and of jobs by readiness. A run count is exact up to
    1,000; above that it is reported as 1001 (more than 1,000).

    ``last_hour`` counts, over the last hour's whole minutes, runs finished (any
    end, halted included), failed (their deadline passed or a pause expired) and
    halted (a step gave up; not failed: they can be retried), and failed attempts,
    free (before their step crossed its boundary) and paid (after)."""
    d = dashboard(request)
    reader = d.reader
    jobs = reader.job_counts()
    shown = (Shown.READY, Shown.DELAYED, JobStatus.RUNNING)
    return ApiResponse({"runs": reader.run_counts(), "jobs": {k: jobs[k] for k in shown},
                        "pipelines": reader.pipeline_counts(), "now": views.iso(jobs["now_ms"]),
                        "last_hour": d.charts.window("hour").totals})


@openapi(parameters=[
    _query("status", "only runs with this status", enum=list(STATUSES)),
    _query("pipeline", "only runs of this pipeline"),
    _query("tag", "only runs carrying this tag, KEY=VALUE (repeat: runs carrying all of them)"),
    _query("after", "cursor: runs older than this (next_cursor of the previous page)"),
    _query("before", "cursor: runs newer than this (prev_cursor of the next page)"),
    _query("limit", f"runs per page, 1 to {MAX_PAGE} (default 50)", "integer"),
    _query("parent", "only the child runs this run started (an id or a unique prefix); one page, no cursors"),
], responses={"200": {"description": "{runs: [...], next_cursor, prev_cursor}"}, "400": {"description": "bad filter"},
              "404": {"description": "no such parent run"}})
def list_runs(request: Request) -> Response:
    """Runs newest first, filtered and keyset-paginated.

    Each run has the fields of ``ductline runs --json`` plus ``started_at``;
    ``reason`` is why it stopped, the text ``ductline runs`` and the dashboard show
    (a halt reason, or the error a failed or cancelled run recorded, such as "the
    run exceeded its deadline of 4 s"). Follow ``next_cursor`` with ``?after=`` for
    older runs; it is null on the last page.
    """
    q = request.query_params
    raw_limit = q.get("limit", "50")
    if not raw_limit.isdigit():
        raise BadQuery(f"limit must be an integer from 1 to {MAX_PAGE}, got {raw_limit[:20]!r}")
    tags = check_tag_filter(q.getlist("tag"))
    parent = q.get("parent")
    if parent is not None:
        if q.get("after") or q.get("before") or tags:
            raise BadQuery("parent lists one page of child runs: give no after, before or tag")
        found = dashboard(request).reader.child_runs(parent, status=q.get("status"), pipeline=q.get("pipeline"),
                                                     limit=int(raw_limit))
        return ApiResponse({"runs": _summaries(request, found), "next_cursor": None, "prev_cursor": None})
    page = dashboard(request).reader.runs_page(status=q.get("status"), pipeline=q.get("pipeline"),
                                               after=q.get("after"), before=q.get("before"), limit=int(raw_limit),
                                               tags=tags)
    return ApiResponse({"runs": _summaries(request, page.runs), "next_cursor": page.older,
                        "prev_cursor": page.newer})


@openapi(parameters=[_path("run_id")],
         responses={"200": {"description": "the run with the fields of `ductline show --json`, plus each step "
                                           "run's `output` and `failures` ({free, paid, deadline}) and the run's `failures`"},
                    "404": {"description": "no such run"}})
def get_run(request: Request) -> Response:
    """One run with its steps and their attempts.

    Values (``args``, ``output``, a step run's ``output``) are plain JSON as
    themselves; a tagged value is ``{"type", "text"}`` plus its structure (``items``
    of a tuple, ``fields`` of a dataclass or pydantic model, ``value`` of an enum)
    and ``kind`` for user types; a step output stored out of line is
    ``{"type": "payload", "text", "id", "size", "link"}``. Every other text is safe
    to show: control characters come escaped (``\\x1b``).
    """
    d = dashboard(request)
    return ApiResponse(runview.build(d.reader, request.path_params["run_id"], d.lease_seconds))


def _point(p: Point) -> dict[str, Any]:
    return {"at": views.iso(p.start), "minutes": p.minutes, "runs_finished": p.finished, "runs_failed": p.failed,
            "runs_halted": p.halted,
            "attempts_failed_free": p.free, "attempts_failed_paid": p.paid, "jobs_ready": round(p.ready, 3),
            "jobs_delayed": round(p.delayed, 3),
            "start_lateness_ms": {f"p{k}": None if v is None else round(v, 1) for k, v in p.lateness.items()},
            "attempt_duration_ms": {f"p{k}": None if v is None else round(v, 1) for k, v in p.duration.items()}}


@openapi(parameters=[_query("window", "hour (a point a minute) or day (a point every 10 minutes)",
                            enum=list(WINDOWS)),
                     _query("pipeline", "only this pipeline")],
         responses={"200": {"description": "{window, pipeline, now, pipelines, totals, points: [{at, minutes, "
                                           "runs_finished, runs_failed, runs_halted, attempts_failed_free, attempts_failed_paid, "
                                           "jobs_ready, jobs_delayed, start_lateness_ms, attempt_duration_ms}]}"},
                    "400": {"description": "unknown window"}})
def charts(request: Request) -> Response:
    """The charts' series, oldest point first.

    Rates (``runs_*``, ``attempts_*``) are per minute; ``jobs_ready`` and
    ``jobs_delayed`` are the average number of jobs waiting over the point;
    ``start_lateness_ms`` and ``attempt_duration_ms`` hold the p50, p95 and p99 of
    the point (null without a sample). ``runs_failed`` counts failed runs only and
    ``runs_halted`` halted ones (halted is not failed); ``runs_finished`` counts
    every end. ``totals`` counts runs finished, failed and halted and attempts
    failed free and paid over the whole window.
    """
    from ductline.web.pages import chart_window

    name, pipeline = chart_window(request)
    shown = dashboard(request).charts.window(name, pipeline)
    return ApiResponse({"window": name, "pipeline": pipeline, "now": views.iso(shown.now_ms),
                        "pipelines": shown.pipelines, "totals": shown.totals,
                        "points": [_point(p) for p in shown.points]})


@openapi(responses={"200": {"description": "`{status: ok}`: the dashboard answers (the database is not read)"}})
def healthz(request: Request) -> Response:
    """Liveness probe."""
    return ApiResponse(probes.liveness().body)


@openapi(responses={"200": {"description": "`{status: ok, schema_version}`"},
                    "503": {"description": "`{status: unavailable, reason}`: the database is unreachable, "
                                           "or its schema is not this version's"}})
def readyz(request: Request) -> Response:
    """Readiness probe: the database answers and its schema is current."""
    probe = dashboard(request).reader.readiness()
    return ApiResponse(probe.body, status_code=probe.status_code, headers={"Cache-Control": "no-store"})


@openapi(parameters=[_path("run_id"), _query("step", "only this step's records")],
         responses={"200": {"description": "`{logs: [{job_id, step, scope, attempt, at, level, logger, message}]}`, "
                                           "oldest first"},
                    "404": {"description": "no such run"}})
def run_logs(request: Request) -> Response:
    """What a run's steps logged and printed, per attempt (as ``ductline logs --json``)."""
    reader = dashboard(request).reader
    run_id = reader.existing(request.path_params["run_id"])  # 404 for an unknown run
    return ApiResponse({"logs": reader.step_logs(run_id, request.query_params.get("step") or None)})


@openapi(parameters=[_path("run_id"), _path("payload_id")],
         responses={"200": {"description": "the payload's JSON text (application/json), streamed chunk by chunk"},
                    "404": {"description": "no such run, or the run has no such payload"}})
def get_payload(request: Request) -> Response:
    """One out-of-line value of a run (an output or arguments above the inline limit).

    The run page links here from ``<payload 3.2 MiB>``; the body is the value's JSON
    text exactly as stored, read from the database one 256 KiB chunk at a time.
    """
    reader = dashboard(request).reader
    run_id, payload_id = reader.existing(request.path_params["run_id"]), request.path_params["payload_id"]
    row = reader.payload(run_id, payload_id)
    if row is None:
        return json_error(404, f"run {run_id} has no payload {payload_id[:40]!r}")
    return StreamingResponse(reader.payload_chunks(run_id, payload_id), media_type="application/json",
                             headers={"Content-Length": str(int(row["size"])),
                                      "Content-Disposition": f'attachment; filename="payload-{payload_id}.json"'})


@openapi(parameters=[_path("run_id"), _query("since", "only events after this time (ms since the epoch)",
                                              "integer")],
         responses={"200": {"description": "text/event-stream of workflow_start, step_start, step_end, "
                                           "workflow_end (status completed|failed|halted|cancelled|timeout)"}})
def run_events(request: Request) -> Response:
    """A run's events as server-sent events, closed after ``workflow_end``."""
    d = dashboard(request)
    run_id = d.reader.existing(request.path_params["run_id"])  # 404 before the stream starts
    since = request.query_params.get("since")
    if since is not None and not since.isdigit():
        raise BadQuery(f"since must be milliseconds since the epoch, got {since[:30]!r}")
    body = events.stream(d.reader, run_id, since_ms=None if since is None else int(since),
                         poll_seconds=d.poll_seconds)
    return StreamingResponse(body, media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@openapi(parameters=[_query("all", f"1: every worker row, also those stopped or lost more than "
                                   f"{worker_rule.RECENTLY_GONE_MS // 60_000} minutes ago")],
         responses={"200": {"description": "{workers: [...]} with health by heartbeat age vs the lease"}})
def list_workers(request: Request) -> Response:
    """Worker processes and their health (healthy, late, unhealthy, lost, stopped; `ductline.model.workers`):
    the live ones and those stopped or lost within the last 15 minutes (or a lease, if
    longer), as ``ductline workers`` lists them; ``?all=1`` gives every row."""
    d = dashboard(request)
    everything = request.query_params.get("all") in ("1", "true")
    return ApiResponse({"workers": d.reader.workers(d.lease_seconds, everything=everything),
                        "lease_seconds": d.lease_seconds})


@openapi(responses={"200": {"description": "{pipelines: [{name, known, steps, runs}]}"}})
def list_pipelines(request: Request) -> Response:
    """Pipelines with runs in the database or defined in this process (``known``: runs can be started)."""
    from ductline.dsl.pipeline import registered_names

    d = dashboard(request)
    counts = d.reader.pipeline_counts()
    out = []
    for name in sorted(set(counts) | set(registered_names())):
        definition = d.definition(name)
        out.append({"name": name, "known": definition is not None,
                    "steps": list(definition.nodes) if definition is not None else None,
                    "runs": counts.get(name, {s: 0 for s in STATUSES})})
    return ApiResponse({"pipelines": out})


async def _body(request: Request) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > start.MAX_BODY_BYTES:
        raise start.BadStart(f"request body is {declared} bytes; the limit is {start.MAX_BODY_BYTES}", 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > start.MAX_BODY_BYTES:
            raise start.BadStart(f"request body exceeds {start.MAX_BODY_BYTES} bytes", 413)
        chunks.append(chunk)
    return b"".join(chunks)


async def _json_body(request: Request, empty: Any = None) -> tuple[Any, Response | None]:
    """The request's body as JSON (``empty`` when there is none), or the error to
    answer: 413 past `start.MAX_BODY_BYTES`, 400 when it is not JSON."""
    try:
        raw = await _body(request)
    except start.BadStart as exc:
        return None, json_error(exc.status, str(exc))
    try:
        return (json.loads(raw) if raw.strip() else empty), None
    except (ValueError, RecursionError) as exc:
        return None, json_error(400, f"request body is not valid JSON: {exc}")


@openapi(parameters=[_path("name")], requestBody={"content": {"application/json": {"schema": {
    "type": "object", "additionalProperties": False, "properties": {
        "args": {"type": "array", "description": "arguments of the first step"},
        "delay": {"type": "integer", "minimum": 0, "description": "start delay in seconds"},
        "delay_until": {"type": "string", "format": "date-time", "description": "start time with UTC offset"},
        "timeout": {"type": "integer", "minimum": 1, "description": "run deadline in seconds"},
        "key": {"type": "string", "minLength": 1, "maxLength": 1000,
                "description": "idempotency key (no NUL or lone surrogate): while a run of the pipeline holding it is active, "
                               "that run is returned (200, created: false) and nothing is started"},
        "priority": {"type": "integer", "minimum": -100, "maximum": 100,
                     "description": "this run's priority instead of the pipeline's; higher is claimed first"},
        "tags": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 256},
                 "maxProperties": 20,
                 "description": "labels to find the run by (GET /api/runs?tag=KEY=VALUE); keys 1 to 64 "
                                "letters, digits or _ . - : /"}}}}}},
    responses={"201": {"description": "a run was started: {run_id, pipeline, created: true, links}"},
               "200": {"description": "an active run already holds the key; nothing was started: "
                                      "{run_id, pipeline, created: false, links} of that run"},
               "400": {"description": "body is not a JSON object"},
               "401": {"description": "missing or wrong bearer token"}, "403": {"description": "read-only"},
               "404": {"description": "pipeline not known to this dashboard"},
               "422": {"description": "a field is wrong; nothing was written"}},
    security=[{"bearer": []}])
async def start_run(request: Request) -> Response:
    """Start a run of a pipeline the dashboard process imported (``--app``).

    Bad input gets a 4xx with a precise message and writes nothing. With a ``key``
    held by an active run of the pipeline, that run is answered (200, ``created``
    false) and nothing is started; a new run is 201 with ``created`` true.
    """
    from ductline.dsl.pipeline import registered

    refused = _refused(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    name = request.path_params["name"]
    try:
        pipeline = registered(name)
    except PipelineNotFound:
        return json_error(404, f"pipeline {name!r} is not known to this dashboard: start the dashboard with "
                               "--app MODULE for the module that defines it")
    try:
        wanted = start.parse(await _body(request))
    except start.BadStart as exc:
        return json_error(exc.status, str(exc))
    try:
        handle = await run_in_threadpool(lambda: d.operations.trigger(
            pipeline.definition(), tuple(wanted.args), delay=wanted.delay, delay_until=wanted.delay_until,
            timeout=wanted.timeout, key=wanted.key, priority=wanted.priority, tags=wanted.tags or None))
    except (TypeError, ValueError) as exc:  # the trigger's own checks; it wrote nothing
        return json_error(422, str(exc))
    except DefinitionError as exc:
        return json_error(500, f"pipeline {name!r} has an invalid definition: {exc}")
    run_id = handle.run_id
    links = {"run": f"/api/runs/{run_id}", "page": f"/runs/{run_id}", "events": f"/api/runs/{run_id}/events"}
    body = {"run_id": run_id, "pipeline": name, "created": handle.created, "links": links}
    if not handle.created:  # the active run holding the key; nothing was started
        return ApiResponse(body, 200)
    return ApiResponse(body, 201, headers={"Location": links["run"]})


@openapi(parameters=[_path("run_id"), _query("force", "a step to re-run although it crossed a boundary (repeat "
                                                          "for several)")],
         responses={"200": {"description": "{revived: true}"}, "409": {"description": "not halted, or unsafe"}},
         security=[{"bearer": []}])
async def retry_run(request: Request) -> Response:
    """Retry a halted run: its failed steps run again with fresh budgets."""
    refused = _refused(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    run_id = await _run_id(request)
    force = request.query_params.getlist("force")
    try:
        await run_in_threadpool(lambda: d.operations.retry(run_id, force=force))
    except InvalidStateError as exc:
        return json_error(409, str(exc).replace("retry with force naming them", "retry with ?force=STEP for each"))
    return ApiResponse({"run_id": run_id, "revived": True})


@openapi(parameters=[_path("run_id")], requestBody={"required": True, "content": {"application/json": {
    "schema": {"type": "object", "additionalProperties": False, "required": ["step", "output"], "properties": {
        "step": {"type": "string", "description": "the step to mark succeeded"},
        "index": {"type": "integer", "minimum": 0,
                  "description": "its element index, for a step with several step runs (an expand)"},
        "output": {"description": "the step's output: any JSON value, what its next step receives"},
        "reason": {"type": "string", "maxLength": 1000, "description": "why, for the run's history"}}}}}},
    responses={"200": {"description": "{run_id, step, revived, enqueued, run_completed}"},
               "400": {"description": "body is not a JSON object"},
               "401": {"description": "missing or wrong bearer token"}, "403": {"description": "read-only"},
               "404": {"description": "no such run, or its pipeline is not known to this dashboard"},
               "409": {"description": "the run is finished, or the step run is completed, running or waiting"},
               "413": {"description": "the body is over 1 MiB"},
               "422": {"description": "a field is wrong, or an output the step's transition cannot take"}},
    security=[{"bearer": []}])
async def mark_step_succeeded(request: Request) -> Response:
    """Mark a failed, held or cancelled step run succeeded with an output, without
    running it; the run continues from there (a halted run is revived as a retry
    revives it). Recorded in the run's history with who (``dashboard`` and the
    client's address), when and why. Nothing is changed when the answer is not 200.
    """
    refused = _refused(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    run_id = await _run_id(request)
    run = await run_in_threadpool(d.reader.run, run_id)
    definition = d.definition(run["pipeline"])
    if definition is None:
        return json_error(404, f"pipeline {run['pipeline']!r} is not known to this dashboard: start it with "
                               "--app MODULE for the module that defines it")
    body, bad = await _json_body(request)
    if bad is not None:
        return bad
    if not isinstance(body, dict):
        return json_error(400, "request body must be a JSON object with step and output")
    unknown = sorted(set(body) - {"step", "index", "output", "reason"})
    if unknown or "step" not in body or "output" not in body:
        return json_error(422, "give step and output (and optionally index, reason)"
                          + (f"; unknown field(s) {', '.join(map(repr, unknown))}" if unknown else ""))
    step, index, reason = body["step"], body.get("index"), body.get("reason")
    if not isinstance(step, str) or (index is not None and (isinstance(index, bool) or not isinstance(index, int))):
        return json_error(422, "step must be a string and index an integer")
    client = request.client.host if request.client else "unknown"
    try:
        marked = await run_in_threadpool(lambda: d.operations.mark_succeeded(
            definition, run_id, step, body["output"], index=index, reason=reason, actor=f"dashboard ({client})"))
    except InvalidStateError as exc:
        return json_error(409, str(exc))
    except (TypeError, ValueError) as exc:
        return json_error(422, str(exc))
    return ApiResponse({"run_id": run_id, "step": step, "revived": marked.revived, "enqueued": marked.enqueued,
                        "run_completed": marked.run_completed})


@openapi(parameters=[_path("run_id")],
         responses={"200": {"description": "{cancelled: bool}"}, "409": {"description": "already finished"}},
         security=[{"bearer": []}])
async def cancel_run(request: Request) -> Response:
    """Cancel a run: in-flight steps stopped, the rest skipped."""
    refused = _refused(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    run_id = await _run_id(request)
    try:
        await run_in_threadpool(d.operations.cancel, run_id)
    except InvalidStateError as exc:
        return json_error(409, str(exc))
    return ApiResponse({"run_id": run_id, "cancelled": True})


@openapi(parameters=[_path("run_id")], requestBody={"required": False, "content": {"application/json": {
    "schema": {"type": "object", "additionalProperties": False, "properties": {
        "input": {"description": "a new input for the paused step: any JSON value, passed as its single "
                                 "argument; omit it to keep the input the step was paused with"}}}}}},
    responses={"200": {"description": "{run_id, resumed: true, steps: [...]}"},
               "400": {"description": "body is not a JSON object"},
               "401": {"description": "missing or wrong bearer token"}, "403": {"description": "read-only"},
               "404": {"description": "no such run"},
               "409": {"description": "the run is not paused (or an input for several paused steps)"},
               "422": {"description": "an unknown field, or an input that does not round-trip through JSON"}},
    security=[{"bearer": []}])
async def resume_run(request: Request) -> Response:
    """Resume a paused run: its paused step runs now, optionally with a new input.

    Nothing is changed when the answer is not 200; of two racing resumes one gets 409.
    """
    from ductline.model.inputs import NO_INPUT

    refused = _refused(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    run_id = await _run_id(request)
    body, bad = await _json_body(request, empty=NO_INPUT)
    if bad is not None:
        return bad
    value: Any = NO_INPUT
    if body is not NO_INPUT:
        if not isinstance(body, dict):
            return json_error(400, f"request body must be a JSON object, got {type(body).__name__}")
        unknown = sorted(set(body) - {"input"})
        if unknown:
            return json_error(422, f"unknown field(s) {unknown}; the only field is 'input'")
        if "input" in body:
            value = body["input"]
    await run_in_threadpool(d.reader.run, run_id)  # 404 for an unknown run
    try:
        resumed = await run_in_threadpool(lambda: d.operations.resume(run_id, value))
    except InvalidStateError as exc:
        return json_error(409, str(exc))
    except (TypeError, ValueError) as exc:
        return json_error(422, str(exc))
    return ApiResponse({"run_id": run_id, "resumed": True, "steps": sorted({r["step"] for r in resumed})})


@openapi(parameters=[_path("run_id")], requestBody={"required": True, "content": {"application/json": {
    "schema": {"type": "object", "additionalProperties": False, "required": ["event"], "properties": {
        "event": {"type": "string", "description": "the event's name (1 to 200 characters)"},
        "data": {"description": "the event's data: any JSON value, the waiting step's single argument "
                                "(default null)"},
        "key": {"type": "string", "description": "an idempotency key: a second send with the same key "
                                                 "changes nothing (duplicate: true)"}}}}}},
    responses={"200": {"description": "{run_id, event, event_id, duplicate, step}: step is the step the event "
                                      "released now, null when it is kept for a wait to come"},
               "400": {"description": "body is not a JSON object"},
               "401": {"description": "missing or wrong bearer token"}, "403": {"description": "read-only"},
               "404": {"description": "no such run"},
               "409": {"description": "the run finished (completed, failed, cancelled), or no step waits for "
                                      "the event and the run keeps max_kept_events events already"},
               "413": {"description": "the body is above 1 MiB, or the data above payload_max_bytes"},
               "422": {"description": "a missing or bad field, or data that does not round-trip through JSON"}},
    security=[{"bearer": []}])
async def send_event(request: Request) -> Response:
    """Send an event to a run: a step waiting for it runs now with its data; else it is kept.

    Nothing is written when the answer is not 200.
    """
    refused = _refused(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    run_id = await _run_id(request)
    body, bad = await _json_body(request)
    if bad is not None:
        return bad
    if not isinstance(body, dict):
        return json_error(400, f"request body must be a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - {"event", "data", "key"})
    if unknown:
        return json_error(422, f"unknown field(s) {unknown}; the fields are 'event', 'data' and 'key'")
    if "event" not in body:
        return json_error(422, "the field 'event' (the event's name) is required")
    await run_in_threadpool(d.reader.run, run_id)  # 404 for an unknown run
    try:
        sent = await run_in_threadpool(
            lambda: d.operations.send(run_id, body["event"], body.get("data"), body.get("key")))
    except InvalidStateError as exc:  # TooManyKeptEvents too
        return json_error(409, str(exc))
    except PayloadTooLarge as exc:
        return json_error(413, str(exc))
    except (TypeError, ValueError) as exc:
        return json_error(422, str(exc))
    return ApiResponse({"run_id": run_id, "event": body["event"], "event_id": sent.event_id,
                        "duplicate": sent.duplicate, "step": sent.step})


@openapi(requestBody={"required": True, "content": {"application/json": {"schema": {
    "type": "object", "additionalProperties": False, "required": ["from", "to"], "properties": {
        "from": {"type": "string", "description": "the definition the runs follow (fingerprint or first digits; "
                                                  "'-': runs from before versions)"},
        "to": {"type": "string", "description": "a definition a worker loaded (fingerprint or first digits)"},
        "map": {"type": "object", "additionalProperties": {"type": "string"},
                "description": "renamed steps, {old: new}"},
        "run_id": {"type": "string", "description": "move only this run"}}}}}},
    responses={"200": {"description": "{pipeline, from, to, moved: [run ids], busy: [run ids left: an attempt ran]}"},
               "400": {"description": "body is not a JSON object of strings"},
               "401": {"description": "missing or wrong bearer token"}, "403": {"description": "read-only"},
               "404": {"description": "no loaded definition matches"},
               "409": {"description": "refused: a job that may still run would have no step (nothing written)"}},
    security=[{"bearer": []}])
async def move_runs(request: Request) -> Response:
    """Move the unfinished runs of one definition to another of the same pipeline.

    Refused, with nothing written, when the mapping leaves a job that may still run
    without a step in the target definition (docs/howto/rolling-deploy.md).
    """
    from ductline.errors import DefinitionNotFound
    from ductline.model.moves import MoveRefused, check_mapping

    refused = _refused(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    body, bad = await _json_body(request)
    if bad is not None:
        return bad
    mapping = body.get("map", {}) if isinstance(body, dict) else None
    if (not isinstance(body, dict) or set(body) - {"from", "to", "map", "run_id"}
            or not isinstance(body.get("from"), str) or not isinstance(body.get("to"), str)
            or not isinstance(body.get("run_id", ""), str) or not isinstance(mapping, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items())):
        return json_error(400, "the body is {\"from\": FP, \"to\": FP, \"map\": {OLD: NEW}, \"run_id\": ID}, "
                               "all strings (map and run_id optional)")
    try:
        check_mapping(mapping)
        result = await run_in_threadpool(lambda: d.operations.move(body["from"], body["to"], mapping,
                                                                   body.get("run_id")))
    except DefinitionNotFound as exc:
        return json_error(404, str(exc))
    except MoveRefused as exc:
        return json_error(409, str(exc))
    except ValueError as exc:
        return json_error(400, str(exc))
    return ApiResponse({"pipeline": result.pipeline, "from": result.from_definition, "to": result.to_definition,
                        "moved": result.moved, "busy": result.busy})


class _Schema(SchemaGenerator):
    def parse_docstring(self, func_or_method: Callable[..., Any]) -> dict[str, Any]:
        summary, _, description = (inspect.getdoc(func_or_method) or "").partition("\n\n")
        spec: dict[str, Any] = {"summary": " ".join(summary.split())}
        if description.strip():
            spec["description"] = description.strip()
        spec.update(getattr(func_or_method, "openapi", {}))
        return spec


SCHEMA = _Schema({"openapi": "3.0.3", "info": {"title": "ductline dashboard", "version": "1"},
                  "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}})


def openapi_schema(request: Request) -> Response:
    return ApiResponse(SCHEMA.get_schema(routes=request.app.routes))


routes = [
    Route("/healthz", healthz),
    Route("/readyz", readyz),
    Route("/api/overview", overview),
    Route("/api/runs", list_runs),
    Route("/api/runs/move", move_runs, methods=["POST"]),
    Route("/api/runs/{run_id}", get_run),
    Route("/api/runs/{run_id}/events", run_events),
    Route("/api/runs/{run_id}/logs", run_logs),
    Route("/api/runs/{run_id}/payloads/{payload_id}", get_payload),
    Route("/api/runs/{run_id}/retry", retry_run, methods=["POST"]),
    Route("/api/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
    Route("/api/runs/{run_id}/resume", resume_run, methods=["POST"]),
    Route("/api/runs/{run_id}/send", send_event, methods=["POST"]),
    Route("/api/runs/{run_id}/mark-succeeded", mark_step_succeeded, methods=["POST"]),
    Route("/api/charts", charts),
    Route("/api/workers", list_workers),
    Route("/api/pipelines", list_pipelines),
    Route("/api/pipelines/{name}/runs", start_run, methods=["POST"]),
    Route("/api/openapi.json", openapi_schema, include_in_schema=False),
]
