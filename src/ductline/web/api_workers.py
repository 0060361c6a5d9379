"""The JSON API's workers: the worker processes and their health by heartbeat age."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ductline.model import workers as worker_rule
from ductline.web.api_support import ApiResponse, openapi, query_parameter
from ductline.web.app import dashboard


@openapi(parameters=[query_parameter("all", f"1: every worker row, also those stopped or lost more than "
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
