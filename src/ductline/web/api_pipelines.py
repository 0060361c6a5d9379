"""The JSON API's pipelines: those with runs or defined in the dashboard's process,
and starting a run of one (with the dashboard's bearer token)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ductline.errors import DefinitionError, PipelineNotFound
from ductline.web import start
from ductline.web.api_support import ApiResponse, json_error, openapi, path_parameter, read_body, refusal
from ductline.web.app import dashboard
from ductline.web.reader import STATUSES


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


@openapi(parameters=[path_parameter("name")], requestBody={"content": {"application/json": {"schema": {
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

    refused = refusal(request)
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
        wanted = start.parse(await read_body(request))
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
