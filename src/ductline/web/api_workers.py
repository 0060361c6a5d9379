"""The JSON API's workers: the worker processes and their health by heartbeat age."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ductline.model import workers as worker_rule
from ductline.web.api_support import ApiResponse, openapi, query_parameter
from ductline.web.app import dashboard
from ductline.web.reader import BadQuery

# A yes/no query parameter: anything else is the client's mistake, said so, rather
# than read as "no" (``?all=yes`` listed only the recent workers).
_YES, _NO = ("1", "true", "yes"), ("", "0", "false", "no")


def _flag(request: Request, name: str) -> bool:
    """Raises: BadQuery: a value neither yes nor no."""
    value = request.query_params.get(name, "").lower()
    if value not in _YES + _NO:
        raise BadQuery(f"{name} must be one of {', '.join(_YES + _NO[1:])}, got {value[:30]!r}")
    return value in _YES


@openapi(parameters=[query_parameter("all", f"1: every worker row, also those stopped or lost more than "
                                            f"{worker_rule.RECENTLY_GONE_MS // 60_000} minutes ago")],
         responses={"200": {"description": "{workers: [...]} with health by heartbeat age vs the lease"}})
def list_workers(request: Request) -> Response:
    """Worker processes and their health (healthy, late, unhealthy, lost, stopped; `ductline.model.workers`):
    the live ones and those stopped or lost within the last 15 minutes (or a lease, if
    longer), as ``ductline workers`` lists them; ``?all=1`` gives every row."""
    d = dashboard(request)
    everything = _flag(request, "all")
    return ApiResponse({"workers": d.reader.workers(d.lease_seconds, everything=everything),
                        "lease_seconds": d.lease_seconds})
