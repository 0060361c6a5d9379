"""The JSON API's actions on runs, each with the dashboard's bearer token and through
the operations layer the CLI uses too: retry a halted run, cancel, resume a paused
run, send an event, mark a step run succeeded, and move runs to another definition."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ductline.errors import InvalidStateError, PayloadTooLarge
from ductline.web.api_support import (ApiResponse, json_body, json_error, openapi, path_parameter, query_parameter,
                                      refusal, run_id_of)
from ductline.web.app import dashboard


@openapi(parameters=[path_parameter("run_id"),
                     query_parameter("force", "a step to re-run although it crossed a boundary (repeat for several)")],
         responses={"200": {"description": "{revived: true}"}, "409": {"description": "not halted, or unsafe"}},
         security=[{"bearer": []}])
async def retry_run(request: Request) -> Response:
    """Retry a halted run: its failed steps run again with fresh budgets."""
    refused = refusal(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    run_id = await run_id_of(request)
    force = request.query_params.getlist("force")
    try:
        await run_in_threadpool(lambda: d.operations.retry(run_id, force=force))
    except InvalidStateError as exc:
        return json_error(409, str(exc).replace("retry with force naming them", "retry with ?force=STEP for each"))
    return ApiResponse({"run_id": run_id, "revived": True})


@openapi(parameters=[path_parameter("run_id")], requestBody={"required": True, "content": {"application/json": {
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
    refused = refusal(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    run_id = await run_id_of(request)
    run = await run_in_threadpool(d.reader.run, run_id)
    definition = d.definition(run["pipeline"])
    if definition is None:
        return json_error(404, f"pipeline {run['pipeline']!r} is not known to this dashboard: start it with "
                               "--app MODULE for the module that defines it")
    body, bad = await json_body(request)
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


@openapi(parameters=[path_parameter("run_id")],
         responses={"200": {"description": "{cancelled: bool}"}, "409": {"description": "already finished"}},
         security=[{"bearer": []}])
async def cancel_run(request: Request) -> Response:
    """Cancel a run: in-flight steps stopped, the rest skipped."""
    refused = refusal(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    run_id = await run_id_of(request)
    try:
        await run_in_threadpool(d.operations.cancel, run_id)
    except InvalidStateError as exc:
        return json_error(409, str(exc))
    return ApiResponse({"run_id": run_id, "cancelled": True})


@openapi(parameters=[path_parameter("run_id")], requestBody={"required": False, "content": {"application/json": {
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

    refused = refusal(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    run_id = await run_id_of(request)
    body, bad = await json_body(request, empty=NO_INPUT)
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


@openapi(parameters=[path_parameter("run_id")], requestBody={"required": True, "content": {"application/json": {
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
    refused = refusal(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    run_id = await run_id_of(request)
    body, bad = await json_body(request)
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

    refused = refusal(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    body, bad = await json_body(request)
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
