"""What every route of the JSON API shares: its answers (`ApiResponse`, every string
safe to show, and `json_error`), the OpenAPI details a route declares (`openapi`,
`query_parameter`, `path_parameter`), the bearer token an action needs (`refusal`),
the run a path names (`run_id_of`) and a request's body (`read_body`, `json_body`)."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ductline import numerals
from ductline.safetext import printable
from ductline.web import start
from ductline.web.app import dashboard
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
    """An error answer: ``{"error": message, "status": status}`` with that HTTP status."""
    return ApiResponse({"error": message, "status": status}, status, headers=headers)


def openapi(**details: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Attach a route's OpenAPI details (parameters, responses, ...) for `ductline.web.api.SCHEMA`."""
    def attach(func: Callable[..., Any]) -> Callable[..., Any]:
        setattr(func, "openapi", details)
        return func
    return attach


def query_parameter(name: str, description: str, kind: str = "string", **extra: Any) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description,
            "schema": {"type": kind, **extra}}


def path_parameter(name: str) -> dict[str, Any]:
    described = {"description": "a full run id or a unique prefix of at least 6 characters, as the CLI takes; "
                                "404 names the runs an ambiguous prefix matches"} if name == "run_id" else {}
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}, **described}


def refusal(request: Request) -> Response | None:
    """401/403 unless the request carries the dashboard's token as a bearer token."""
    d = dashboard(request)
    if not d.access.enabled:
        return json_error(403, "the dashboard is read-only: DUCTLINE_DASHBOARD_TOKEN is not set where it runs")
    if not d.access.bearer(request):
        return json_error(401, "missing or wrong token: send Authorization: Bearer <DUCTLINE_DASHBOARD_TOKEN>",
                          {"WWW-Authenticate": 'Bearer realm="ductline"'})
    return None


async def run_id_of(request: Request) -> str:
    """The full id of the run the path names: a full id or a unique prefix of at
    least 6 characters, as the CLI and the dashboard's pages take it (one rule:
    `ductline.views.resolve_run_id`).

    Raises:
        RunNotFound: no run, or several runs, start with it (404, saying which).
    """
    return await run_in_threadpool(dashboard(request).reader.existing, request.path_params["run_id"])


def _declared_bytes(header: str) -> int:
    """The body size a Content-Length header declares; 0 when it is no ASCII number
    (the stream's own count below still holds the limit)."""
    try:
        return numerals.whole_number(header)
    except ValueError:
        return 0


async def read_body(request: Request) -> bytes:
    """The request's body; `start.BadStart` (413) past `start.MAX_BODY_BYTES`."""
    declared = request.headers.get("content-length", "")
    if _declared_bytes(declared) > start.MAX_BODY_BYTES:
        raise start.BadStart(f"request body is {declared} bytes; the limit is {start.MAX_BODY_BYTES}", 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > start.MAX_BODY_BYTES:
            raise start.BadStart(f"request body exceeds {start.MAX_BODY_BYTES} bytes", 413)
        chunks.append(chunk)
    return b"".join(chunks)


async def json_body(request: Request, empty: Any = None) -> tuple[Any, Response | None]:
    """The request's body as JSON (``empty`` when there is none), or the error to
    answer: 413 past `start.MAX_BODY_BYTES`, 400 when it is not JSON."""
    try:
        raw = await read_body(request)
    except start.BadStart as exc:
        return None, json_error(exc.status, str(exc))
    try:
        return (json.loads(raw) if raw.strip() else empty), None
    except (ValueError, RecursionError) as exc:
        return None, json_error(400, f"request body is not valid JSON: {exc}")
