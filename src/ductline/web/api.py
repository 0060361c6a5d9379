"""The JSON API: the same reads as the pages, plus starting, retrying, cancelling and
resuming runs with ``Authorization: Bearer <DUCTLINE_DASHBOARD_TOKEN>``.

Its routes, by resource: runs (`ductline.web.api_runs`), actions on runs
(`ductline.web.api_run_actions`), pipelines (`ductline.web.api_pipelines`), the
overview and charts (`ductline.web.api_overview`), workers
(`ductline.web.api_workers`) and the probes (`ductline.web.api_health`); what they
share is `ductline.web.api_support`.

The OpenAPI schema at ``/api/openapi.json`` is built from the routes' docstrings
(first paragraph: summary, the rest: description) and their ``openapi`` details.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.schemas import SchemaGenerator

from ductline.web.api_health import healthz, readyz
from ductline.web.api_overview import charts, overview
from ductline.web.api_pipelines import list_pipelines, start_run
from ductline.web.api_run_actions import (cancel_run, mark_step_succeeded, move_runs, resume_run, retry_run,
                                          send_event)
from ductline.web.api_runs import get_payload, get_run, list_runs, run_events, run_logs
from ductline.web.api_support import ApiResponse
from ductline.web.api_workers import list_workers


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
