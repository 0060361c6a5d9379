"""The JSON API's reads of runs: the runs list (filtered, keyset-paginated), one run
with its steps and attempts, its step logs, its out-of-line payloads and its events
as a server-sent stream."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ductline import views
from ductline.web import events, runview
from ductline.web.api_support import ApiResponse, json_error, openapi, path_parameter, query_parameter
from ductline.web.app import dashboard
from ductline.web.reader import MAX_PAGE, STATUSES, BadQuery, check_tag_filter, query_number

# The largest ``since``: a 64-bit millisecond count (the database's integer), so a
# longer number is the client's mistake, not an overflow in the query.
_LATEST_MS = 2 ** 63 - 1


def _summaries(request: Request, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    reasons = dashboard(request).reader.run_reasons(rows)
    return [{**views.run_summary(r, reasons.get(r["id"])), "started_at": views.iso(r["started_ms"])} for r in rows]


@openapi(parameters=[
    query_parameter("status", "only runs with this status", enum=list(STATUSES)),
    query_parameter("pipeline", "only runs of this pipeline"),
    query_parameter("tag", "only runs carrying this tag, KEY=VALUE (repeat: runs carrying all of them)"),
    query_parameter("after", "cursor: runs older than this (next_cursor of the previous page)"),
    query_parameter("before", "cursor: runs newer than this (prev_cursor of the next page)"),
    query_parameter("limit", f"runs per page, 1 to {MAX_PAGE} (default 50)", "integer"),
    query_parameter("parent", "only the child runs this run started (an id or a unique prefix); one page, no cursors"),
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
    limit = query_number("limit", q.get("limit", "50"), 1, MAX_PAGE, f"an integer from 1 to {MAX_PAGE}")
    tags = check_tag_filter(q.getlist("tag"))
    parent = q.get("parent")
    if parent is not None:
        if q.get("after") or q.get("before") or tags:
            raise BadQuery("parent lists one page of child runs: give no after, before or tag")
        found = dashboard(request).reader.child_runs(parent, status=q.get("status"), pipeline=q.get("pipeline"),
                                                     limit=limit)
        return ApiResponse({"runs": _summaries(request, found), "next_cursor": None, "prev_cursor": None})
    page = dashboard(request).reader.runs_page(status=q.get("status"), pipeline=q.get("pipeline"),
                                               after=q.get("after"), before=q.get("before"), limit=limit,
                                               tags=tags)
    return ApiResponse({"runs": _summaries(request, page.runs), "next_cursor": page.older,
                        "prev_cursor": page.newer})


@openapi(parameters=[path_parameter("run_id")],
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


@openapi(parameters=[path_parameter("run_id"), query_parameter("step", "only this step's records")],
         responses={"200": {"description": "`{logs: [{job_id, step, scope, attempt, at, level, logger, message}]}`, "
                                           "oldest first"},
                    "404": {"description": "no such run"}})
def run_logs(request: Request) -> Response:
    """What a run's steps logged and printed, per attempt (as ``ductline logs --json``)."""
    reader = dashboard(request).reader
    run_id = reader.existing(request.path_params["run_id"])  # 404 for an unknown run
    return ApiResponse({"logs": reader.step_logs(run_id, request.query_params.get("step") or None)})


@openapi(parameters=[path_parameter("run_id"), path_parameter("payload_id")],
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


@openapi(parameters=[path_parameter("run_id"),
                     query_parameter("since", "only events after this time (ms since the epoch)", "integer")],
         responses={"200": {"description": "text/event-stream of workflow_start, step_start, step_end, "
                                           "workflow_end (status completed|failed|halted|cancelled|timeout)"}})
def run_events(request: Request) -> Response:
    """A run's events as server-sent events, closed after ``workflow_end``."""
    d = dashboard(request)
    run_id = d.reader.existing(request.path_params["run_id"])  # 404 before the stream starts
    since = request.query_params.get("since")
    since_ms = None if since is None else query_number("since", since, 0, _LATEST_MS, "milliseconds since the epoch")
    body = events.stream(d.reader, run_id, since_ms=since_ms,
                         poll_seconds=d.poll_seconds)
    return StreamingResponse(body, media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
