"""The HTML pages: overview, runs list, run page, login, and the retry/cancel/resume/send forms."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import anyio

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ductline.errors import InvalidStateError
from ductline.model import workers as worker_rule
from ductline.model.states import MARKABLE_JOB, TERMINAL_RUN, JobStatus, RunStatus
from ductline.views import RUN_ID_LENGTH
from ductline.web import runpage, svgchart
from ductline.web.app import dashboard
from ductline.web.charts import WINDOWS
from ductline.web.reader import STATUSES, BadQuery, check_filters, check_tag_filter
from ductline.web.security import csrf_ok, csrf_token

PAGE_SIZE = 50
WRONG_TOKEN_DELAY_SECONDS = 0.5
# The overview lists the latest runs in these ("Needs attention") and marks their counts.
PROBLEM_STATUSES = (RunStatus.HALTED, RunStatus.FAILED)


def render(request: Request, template: str, context: dict[str, Any], status: int = 200,
           now_ms: int | None = None) -> Response:
    d = dashboard(request)
    base = {
        "access_enabled": d.access.enabled, "logged_in": d.access.logged_in(request),
        "read_token": d.access.read_token is not None,
        "csrf": csrf_token(request) if d.access.enabled or d.access.read_token is not None else "",
        "flash": request.session.pop("flash", None) if "flash" in request.session else None,
        "statuses": STATUSES, "problem_statuses": PROBLEM_STATUSES, "now_ms": now_ms, "path": request.url.path,
    }
    return d.templates.TemplateResponse(request, template, {**base, **context}, status_code=status)


def error_page(request: Request, status: int, message: str) -> Response:
    return render(request, "error.html", {"status": status, "message": message}, status)


def flash(request: Request, kind: str, message: str) -> None:
    request.session["flash"] = {"kind": kind, "message": message}


def overview(request: Request) -> Response:
    """Counts by status, jobs, workers and the latest problems."""
    d = dashboard(request)
    reader = d.reader
    jobs = reader.job_counts()
    problems = [run for status in PROBLEM_STATUSES for run in reader.runs_page(status=status, limit=10).runs]
    problems.sort(key=lambda r: (r["created_ms"], r["id"]), reverse=True)
    hour = d.charts.window("hour")
    return render(request, "overview.html", {
        "hour": hour, "hour_chart": svgchart.charts(hour)[0],
        "counts": reader.run_counts(), "jobs": jobs, "pipelines": reader.pipeline_counts(),
        "workers": reader.workers(d.lease_seconds, everything=request.query_params.get("workers") == "all"),
        "all_workers": request.query_params.get("workers") == "all",
        "recent_minutes": worker_rule.RECENTLY_GONE_MS // 60_000, "problems": problems[:10],
        "reasons": reader.run_reasons(problems[:10]),
        "lease_seconds": d.lease_seconds, "schedules": reader.schedules(),
        "queues": reader.queues(d.lease_seconds),
    }, now_ms=jobs["now_ms"])


def chart_window(request: Request) -> tuple[str, str | None]:
    """The ``window`` (hour or day) and ``pipeline`` of a charts request.

    Raises:
        BadQuery: an unknown window or an overlong pipeline name.
    """
    q = request.query_params
    name = q.get("window") or "hour"
    if name not in WINDOWS:
        raise BadQuery(f"unknown window {name[:20]!r}; use one of {', '.join(WINDOWS)}")
    _, pipeline = check_filters(None, q.get("pipeline"))
    return name, pipeline


def charts(request: Request) -> Response:
    """Runs finished and failed, failed attempts, waiting jobs, start lateness and
    attempt durations per minute, over the last hour or day, per pipeline."""
    d = dashboard(request)
    name, pipeline = chart_window(request)
    shown = d.charts.window(name, pipeline)
    return render(request, "charts.html", {"window": shown, "charts": svgchart.charts(shown), "windows": WINDOWS,
                                           "pipeline": pipeline or "", "window_name": name}, now_ms=shown.now_ms)


def runs(request: Request) -> Response:
    """Runs newest first, filtered by status and pipeline, keyset-paginated."""
    d = dashboard(request)
    q = request.query_params
    status, pipeline = q.get("status") or None, q.get("pipeline") or None
    # One text box of space-separated KEY=VALUE tags, or repeated ``tag=`` (as the API)
    tag_texts = [t for text in q.getlist("tag") for t in text.split()]
    tags = check_tag_filter(tag_texts)
    page = d.reader.runs_page(status=status, pipeline=pipeline, after=q.get("after") or None,
                              before=q.get("before") or None, limit=PAGE_SIZE, tags=tags)
    filters: list[tuple[str, str]] = [(k, v) for k, v in (("status", status), ("pipeline", pipeline)) if v]
    filters += [("tag", f"{k}={v}") for k, v in tags]

    def link(**cursor: str) -> str:
        return "/runs?" + urlencode([*filters, *cursor.items()]) if (filters or cursor) else "/runs"

    return render(request, "runs.html", {
        "page": page, "reasons": d.reader.run_reasons(page.runs), "status": status or "",
        "pipeline": pipeline or "",
        "tag_filter": " ".join(f"{k}={v}" for k, v in tags),
        "pipelines": d.reader.pipeline_names(),
        "older_link": link(after=page.older) if page.older else None,
        "newer_link": link(before=page.newer) if page.newer else None,
        "first_link": link() if (q.get("after") or q.get("before")) else None,
    }, now_ms=d.reader.now_ms())


def run_page(request: Request) -> Response:
    """One run: graph, why it stopped, steps and attempts, actions."""
    d = dashboard(request)
    run_id = request.path_params["run_id"]
    if len(run_id) < RUN_ID_LENGTH:  # a prefix, as the CLI takes: the page has one address
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"/runs/{d.reader.resolve(run_id)}{query}", 307)
    run = d.reader.run(run_id)
    now_ms = d.reader.now_ms()
    definition = d.definition(run["pipeline"])
    page = runpage.build(run, d.reader.run_jobs(run_id), d.reader.run_attempts(run_id), definition, now_ms,
                         show_all=request.query_params.get("all"), logs=d.reader.step_logs(run_id),
                         offers=d.reader.offers(d.lease_seconds), marks=d.reader.step_marks(run_id))
    # Step runs an operator may mark succeeded (`ductline.model.marking`), by "step" or "step[index]"
    markable = [] if definition is None or RunStatus(run["status"]) in TERMINAL_RUN else [
        j["step"] + ("" if j["elem_index"] is None else f"[{j['elem_index']}]")
        for j in d.reader.run_jobs(run_id) if JobStatus(j["status"]) in MARKABLE_JOB]
    return render(request, "run.html", {"page": page, "run": run, "known": definition is not None,
                                        "tags": d.reader.run_tags(run_id), "markable": markable,
                                        "operator_actions": d.reader.operator_actions(run_id),
                                        "family": d.reader.family(run_id)},
                  now_ms=now_ms)


async def login(request: Request) -> Response:
    d = dashboard(request)
    target = request.query_params.get("next", "/")
    if request.method == "GET":
        return render(request, "login.html", {"next": _local(target), "failed": False})
    form = await request.form()
    target = _local(str(form.get("next", "/")))
    if not d.access.enabled and d.access.read_token is None:
        return error_page(request, 403, "This dashboard is read-only: DUCTLINE_DASHBOARD_TOKEN is not set.")
    if not csrf_ok(request, form.get("csrf")):
        return error_page(request, 403, "The form expired or came from another site (CSRF check failed). "
                                        "Reload the page and try again.")
    given = str(form.get("token", ""))
    if d.access.matches(given):
        request.session["auth"] = d.access.fingerprint()
        message = "Logged in: retry and cancel are enabled."
    elif d.access.matches_read(given):
        request.session["read"] = d.access.read_fingerprint()
        message = "Logged in to read."
    else:
        await anyio.sleep(WRONG_TOKEN_DELAY_SECONDS)  # slows guessing down
        return render(request, "login.html", {"next": target, "failed": True}, 401)
    request.session.pop("csrf", None)  # the logged-in session gets a fresh CSRF token
    flash(request, "ok", message)
    return RedirectResponse(target, 303)


async def logout(request: Request) -> Response:
    form = await request.form()
    if not csrf_ok(request, form.get("csrf")):
        return error_page(request, 403, "CSRF check failed. Reload the page and try again.")
    request.session.clear()
    return RedirectResponse("/", 303)


def _local(target: str) -> str:
    """Only redirect within this dashboard (never to ``//other.host``), and not back to the login."""
    local = target.startswith("/") and not target.startswith("//") and "\\" not in target
    return target if local and not target.startswith("/login") else "/"


async def _authorised_form(request: Request) -> tuple[FormData | None, Response | None]:
    d = dashboard(request)
    if not d.access.enabled:
        return None, error_page(request, 403, "This dashboard is read-only: set DUCTLINE_DASHBOARD_TOKEN "
                                              "where it runs to enable retry and cancel.")
    form = await request.form()
    if not d.access.logged_in(request):
        return None, error_page(request, 403, "Log in with the dashboard token to retry or cancel runs.")
    if not csrf_ok(request, form.get("csrf")):
        return None, error_page(request, 403, "The form expired or came from another site (CSRF check "
                                              "failed). Reload the page and try again.")
    return form, None


async def retry(request: Request) -> Response:
    """Revive a halted run (`ductline.operations.revive.retry_run`)."""
    form, refused = await _authorised_form(request)
    if refused is not None:
        return refused
    assert form is not None
    d = dashboard(request)
    run_id = request.path_params["run_id"]
    await run_in_threadpool(d.reader.run, run_id)  # RunNotFound -> the error page
    force = [str(step) for step in form.getlist("force")]
    try:
        await run_in_threadpool(lambda: d.operations.retry(run_id, force=force))
    except InvalidStateError as exc:
        if "boundary" in str(exc):
            flash(request, "error", "Not retried: a step crossed an irreversible boundary. Tick “re-run steps "
                                    "that crossed a boundary” to re-run it on purpose.")
        else:
            flash(request, "error", f"Not retried: {exc}.")
    else:
        flash(request, "ok", "Run revived: its failed steps run again with fresh retry budgets.")
    return RedirectResponse(f"/runs/{run_id}", 303)


async def cancel(request: Request) -> Response:
    """Cancel a run (`ductline.operations.cancel.cancel_run`)."""
    form, refused = await _authorised_form(request)
    if refused is not None:
        return refused
    d = dashboard(request)
    run_id = request.path_params["run_id"]
    await run_in_threadpool(d.reader.run, run_id)  # 404 for an unknown run
    try:
        await run_in_threadpool(d.operations.cancel, run_id)
    except InvalidStateError as exc:
        flash(request, "error", f"Not cancelled: {exc}")
    else:
        flash(request, "ok", "Run cancelled.")
    return RedirectResponse(f"/runs/{run_id}", 303)


async def mark_succeeded(request: Request) -> Response:
    """Mark a step run succeeded (`ductline.operations.mark.mark_succeeded`) with the
    form's ``output`` (JSON) and ``reason``; ``step`` is ``step`` or ``step[index]``."""
    import json
    import re

    form, refused = await _authorised_form(request)
    if refused is not None:
        return refused
    assert form is not None
    d = dashboard(request)
    run_id = request.path_params["run_id"]
    run = await run_in_threadpool(d.reader.run, run_id)  # 404 for an unknown run
    definition = d.definition(run["pipeline"])
    # ASCII digits only: ``\d`` takes other scripts' digits, which int() would read.
    chosen = re.fullmatch(r"(?P<step>.+?)(?:\[(?P<index>[0-9]+)\])?", str(form.get("step") or ""))
    try:
        if definition is None:
            raise ValueError(f"pipeline {run['pipeline']!r} is not known to this dashboard (start it with --app)")
        if chosen is None:
            raise ValueError("choose a step")
        output = json.loads(str(form.get("output") or ""))
    except (ValueError, RecursionError) as exc:
        flash(request, "error", f"Not marked: {exc}")
        return RedirectResponse(f"/runs/{run_id}", 303)
    index = None if chosen["index"] is None else int(chosen["index"])
    reason = str(form.get("reason") or "").strip() or None
    client = request.client.host if request.client else "unknown"
    try:
        await run_in_threadpool(lambda: d.operations.mark_succeeded(
            definition, run_id, chosen["step"], output, index=index, reason=reason, actor=f"dashboard ({client})"))
    except (InvalidStateError, TypeError, ValueError) as exc:
        flash(request, "error", f"Not marked: {exc}")
    else:
        flash(request, "ok", f"Step {chosen[0]} marked succeeded: the run continues from it.")
    return RedirectResponse(f"/runs/{run_id}", 303)


async def resume(request: Request) -> Response:
    """Resume a paused run (`ductline.operations.resume.resume`), with the form's
    ``input`` (JSON) as the paused step's new input when it is not empty."""
    import json

    from ductline.model.inputs import NO_INPUT

    form, refused = await _authorised_form(request)
    if refused is not None:
        return refused
    assert form is not None
    d = dashboard(request)
    run_id = request.path_params["run_id"]
    await run_in_threadpool(d.reader.run, run_id)  # 404 for an unknown run
    text = str(form.get("input") or "").strip()
    value: Any = NO_INPUT
    if text:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            flash(request, "error", f"Not resumed: the input is not valid JSON ({exc}).")
            return RedirectResponse(f"/runs/{run_id}", 303)
    try:
        resumed = await run_in_threadpool(lambda: d.operations.resume(run_id, value))
    except (InvalidStateError, TypeError, ValueError) as exc:
        flash(request, "error", f"Not resumed: {exc}")
    else:
        steps = ", ".join(sorted({r["step"] for r in resumed}))
        flash(request, "ok", f"Run resumed: {steps or 'no paused step'} runs now"
                             + (" with the new input." if text else "."))
    return RedirectResponse(f"/runs/{run_id}", 303)


async def send(request: Request) -> Response:
    """Send an event to a run (`ductline.operations.send.send`): the form's ``event``,
    its ``data`` (JSON; empty is null) and an optional idempotency ``key``."""
    import json

    form, refused = await _authorised_form(request)
    if refused is not None:
        return refused
    assert form is not None
    d = dashboard(request)
    run_id = request.path_params["run_id"]
    await run_in_threadpool(d.reader.run, run_id)  # 404 for an unknown run
    event = str(form.get("event") or "")
    text = str(form.get("data") or "").strip()
    key = str(form.get("key") or "").strip() or None
    value: Any = None
    if text:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            flash(request, "error", f"Not sent: the data is not valid JSON ({exc}).")
            return RedirectResponse(f"/runs/{run_id}", 303)
    try:
        sent = await run_in_threadpool(lambda: d.operations.send(run_id, event, value, key))
    except (InvalidStateError, TypeError, ValueError) as exc:
        flash(request, "error", f"Not sent: {exc}")
    else:
        if sent.duplicate:
            flash(request, "ok", f"Event {event!r} with this key was sent already: nothing changed.")
        elif sent.step is not None:
            flash(request, "ok", f"Event {event!r} sent: step {sent.step} runs now.")
        else:
            flash(request, "ok", f"Event {event!r} sent: kept until the run waits for it.")
    return RedirectResponse(f"/runs/{run_id}", 303)


routes = [
    Route("/", overview, include_in_schema=False),
    Route("/runs", runs, include_in_schema=False),
    Route("/charts", charts, include_in_schema=False),
    Route("/runs/{run_id}", run_page, include_in_schema=False),
    Route("/runs/{run_id}/retry", retry, methods=["POST"], include_in_schema=False),
    Route("/runs/{run_id}/cancel", cancel, methods=["POST"], include_in_schema=False),
    Route("/runs/{run_id}/resume", resume, methods=["POST"], include_in_schema=False),
    Route("/runs/{run_id}/send", send, methods=["POST"], include_in_schema=False),
    Route("/runs/{run_id}/mark-succeeded", mark_succeeded, methods=["POST"], include_in_schema=False),
    Route("/login", login, methods=["GET", "POST"], include_in_schema=False),
    Route("/logout", logout, methods=["POST"], include_in_schema=False),
]
