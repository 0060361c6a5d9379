"""The dashboard's probes: liveness (it answers) and readiness (its database answers
and its schema is current)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ductline.observability import probes
from ductline.web.api_support import ApiResponse, openapi
from ductline.web.app import dashboard


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
