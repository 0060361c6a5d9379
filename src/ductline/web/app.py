"""The dashboard application: `create_app` wires the store, the token, the templates
and the routes into one Starlette app.

Run it with ``ductline dashboard`` (binds 127.0.0.1), or with uvicorn's factory
mode: ``uvicorn --factory ductline.web.app:create_app`` (configured by the
environment: ``DUCTLINE_DATABASE_URL``, ``DUCTLINE_DASHBOARD_TOKEN``).
"""

from __future__ import annotations

import logging
import threading
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Sequence
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ductline.config import load_settings
from ductline.dsl.graph import Definition
from ductline.errors import DuctlineError, PipelineNotFound, RunNotFound, StoreError, StoreUnavailable
from ductline.model.states import JobStatus, RunStatus
from ductline.operations.bound import RunOperations
from ductline.store import Store, open_store
from ductline.web.charts import ChartCache
from ductline.web.graph import Shown
from ductline.web.present import FILTERS, text
from ductline.web.reader import BadQuery, DashboardReader
from ductline.web.security import (OPEN_PATHS, SESSION_COOKIE, SESSION_MAX_AGE_SECONDS, Access, allowed_hosts,
                                   host_of)

log = logging.getLogger("ductline.web")
HERE = Path(__file__).parent

SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]


class SecurityHeaders:
    """Adds a strict Content-Security-Policy and friends to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HostCheck:
    """Answers 421 to a request whose ``Host`` is not allowed (DNS rebinding: a page
    of another site whose name now resolves to this address), except probes."""

    def __init__(self, app: ASGIApp, hosts: Sequence[str]) -> None:
        self.app = app
        self.hosts = frozenset(hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and "*" not in self.hosts and not scope["path"].startswith(("/healthz", "/readyz")):
            header = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if host_of(header) not in self.hosts:
                response = PlainTextResponse(f"host {header!r} is not served here (allowed: "
                                             f"{', '.join(sorted(self.hosts))}; --allowed-host adds one)", 421)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class ReadGuard:
    """With a read token, every page and API read needs it (or the action token):
    pages redirect to the login form, the API answers 401."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.access.read_token is None or scope["path"].startswith(OPEN_PATHS):
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        if self.access.may_read(request):
            await self.app(scope, receive, send)
            return
        response: Response
        if scope["path"].startswith("/api/"):
            response = JSONResponse({"error": "this dashboard needs its read token: send Authorization: Bearer "
                                              "<DUCTLINE_DASHBOARD_READ_TOKEN>"}, 401,
                                    headers={"WWW-Authenticate": 'Bearer realm="ductline"'})
        else:
            target = scope["path"] + (f"?{scope['query_string'].decode()}" if scope.get("query_string") else "")
            response = RedirectResponse(f"/login?{urlencode({'next': target})}", 303)
        await response(scope, receive, send)


@dataclass(slots=True)
class Dashboard:
    """What every route needs, kept on ``app.state.dashboard``."""

    reader: DashboardReader    # every read goes through it
    operations: RunOperations  # every action goes through it
    access: Access
    templates: Jinja2Templates
    lease_seconds: float
    poll_seconds: float
    charts: ChartCache         # minute summaries of the last day, read as needed

    def definition(self, pipeline: str) -> Definition | None:
        """The pipeline's definition if this process imported it (``--app``), else ``None``."""
        from ductline.dsl.pipeline import registered

        try:
            return registered(pipeline).definition()
        except (PipelineNotFound, DuctlineError):
            return None


def dashboard(request: Request) -> Dashboard:
    value: Dashboard = request.app.state.dashboard
    return value


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


async def _error(request: Request, exc: Exception) -> Response:
    from ductline.web.pages import error_page
    from ductline.web.api_support import json_error

    if isinstance(exc, HTTPException):
        status, message = exc.status_code, str(exc.detail)
    elif isinstance(exc, RunNotFound):
        status, message = 404, str(exc).strip("'\"")
    elif isinstance(exc, BadQuery):
        status, message = 400, str(exc)
    elif isinstance(exc, StoreUnavailable):
        status, message = 503, f"the database is unavailable: {exc}"
    elif isinstance(exc, StoreError):
        log.error("store error: %s", exc)
        status, message = 500, f"the database refused the request: {exc}"
    else:  # pragma: no cover - defensive
        log.exception("dashboard error", exc_info=exc)
        status, message = 500, f"{type(exc).__name__}: {exc}"
    if _wants_json(request):
        return json_error(status, message)
    return error_page(request, status, message)


@asynccontextmanager
async def _warming(app: Starlette) -> AsyncIterator[None]:
    """Serve, and meanwhile read the last day's charts once (`create_app`'s ``warm_charts``)."""
    charts: ChartCache = app.state.dashboard.charts

    def warm() -> None:
        try:
            charts.window("day")
        except Exception as exc:  # noqa: BLE001 - a page will read it (and say why) when asked
            log.warning("could not read the charts of the last day ahead: %s", exc)

    threading.Thread(target=warm, name="ductline-dashboard-charts", daemon=True).start()
    yield


def create_app(store: Store | None = None, *, database: str | None = None, token: str | None = None,
               read_token: str | None = None, hosts: Sequence[str] = (), apps: Sequence[str] = (),
               lease_seconds: float | None = None, poll_seconds: float = 0.5, warm_charts: bool = False) -> Starlette:
    """Build the dashboard.

    Args:
        store: the store to read; by default one is opened from ``database`` or the
            configured URL (SQLite is migrated, PostgreSQL must be already).
        token: the actions' token; by default ``DUCTLINE_DASHBOARD_TOKEN``. Without
            one the dashboard is read-only.
        read_token: a token every read needs too; by default
            ``DUCTLINE_DASHBOARD_READ_TOKEN`` (unset: reading needs none).
        hosts: ``Host`` names served besides localhost and those in
            ``DUCTLINE_DASHBOARD_ALLOWED_HOSTS`` (``*`` serves any).
        apps: modules or files to import, so their pipelines' graphs are known and
            runs of them can be started through the API.
        lease_seconds: the workers' lease, to judge heartbeat ages (default: settings).
        poll_seconds: how often an event stream looks at the database.
        warm_charts: once serving, read the last day's charts in a background thread,
            so the first visit to them does not wait for it (``ductline dashboard``
            does; a request meanwhile waits for that read instead of repeating it).

    Raises:
        TargetError: an app cannot be imported.
        ConfigurationError, SchemaError, StoreUnavailable: as `ductline.stores.ensure_schema`.
    """
    from ductline.apps import import_app
    from ductline.stores import ensure_schema
    from ductline.web import api, pages

    settings = load_settings(database_url=database)
    if store is None:
        store = open_store(settings.database_url, application_name="ductline-dashboard")
        ensure_schema(store)
    for spec in apps:
        import_app(spec)
    default = Access.from_env()
    access = Access(token or default.token, read_token or default.read_token)
    # finalize: every {{ expression }} is made safe to show (lone surrogates, NUL and
    # terminal control characters escaped) before it is HTML-escaped.
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, finalize=text)
    env.filters.update(FILTERS)
    # Templates compare states with the rulebook's names, never with string literals.
    env.globals.update(RunStatus=RunStatus, JobStatus=JobStatus, Shown=Shown)
    templates = Jinja2Templates(env=env)
    routes: list[Any] = [*pages.routes, *api.routes,
                         Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")]
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(HostCheck, hosts=allowed_hosts(hosts)),
        Middleware(SessionMiddleware, secret_key=access.session_secret(), session_cookie=SESSION_COOKIE,
                   max_age=SESSION_MAX_AGE_SECONDS, same_site="lax"),
        Middleware(ReadGuard, access=access),
    ]
    handlers: dict[Any, Any] = {HTTPException: _error, RunNotFound: _error, BadQuery: _error,
                                StoreError: _error}
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers,
                    lifespan=_warming if warm_charts else None)
    reader = DashboardReader(store)
    app.state.dashboard = Dashboard(reader, RunOperations(store), access, templates,
                                    lease_seconds if lease_seconds is not None else settings.lease_seconds,
                                    poll_seconds, ChartCache(reader.chart_rows, reader.now_ms))
    return app
