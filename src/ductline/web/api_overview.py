"""The JSON API's overview: counts of runs by status and of jobs by readiness, and
the charts' series over the last hour or day."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ductline import views
from ductline.model.states import JobStatus
from ductline.web.api_support import ApiResponse, openapi, query_parameter
from ductline.web.app import dashboard
from ductline.web.charts import WINDOWS, Point
from ductline.web.graph import Shown


@openapi(responses={"200": {"description": "runs by status, jobs ready/delayed/running, pipelines, last_hour"}})
def overview(request: Request) -> Response:
    """Counts of runs by status and of jobs by readiness. A run count is exact up to
    1,000; above that it is reported as 1001 (more than 1,000).

    ``last_hour`` counts, over the last hour's whole minutes, runs finished (any
    end, halted included), failed (their deadline passed or a pause expired) and
    halted (a step gave up; not failed: they can be retried), and failed attempts,
    free (before their step crossed its boundary) and paid (after)."""
    d = dashboard(request)
    reader = d.reader
    jobs = reader.job_counts()
    shown = (Shown.READY, Shown.DELAYED, JobStatus.RUNNING)
    return ApiResponse({"runs": reader.run_counts(), "jobs": {k: jobs[k] for k in shown},
                        "pipelines": reader.pipeline_counts(), "now": views.iso(jobs["now_ms"]),
                        "last_hour": d.charts.window("hour").totals})


def _point(p: Point) -> dict[str, Any]:
    return {"at": views.iso(p.start), "minutes": p.minutes, "runs_finished": p.finished, "runs_failed": p.failed,
            "runs_halted": p.halted,
            "attempts_failed_free": p.free, "attempts_failed_paid": p.paid, "jobs_ready": round(p.ready, 3),
            "jobs_delayed": round(p.delayed, 3),
            "start_lateness_ms": {f"p{k}": None if v is None else round(v, 1) for k, v in p.lateness.items()},
            "attempt_duration_ms": {f"p{k}": None if v is None else round(v, 1) for k, v in p.duration.items()}}


@openapi(parameters=[query_parameter("window", "hour (a point a minute) or day (a point every 10 minutes)",
                                     enum=list(WINDOWS)),
                     query_parameter("pipeline", "only this pipeline")],
         responses={"200": {"description": "{window, pipeline, now, pipelines, totals, points: [{at, minutes, "
                                           "runs_finished, runs_failed, runs_halted, attempts_failed_free, attempts_failed_paid, "
                                           "jobs_ready, jobs_delayed, start_lateness_ms, attempt_duration_ms}]}"},
                    "400": {"description": "unknown window"}})
def charts(request: Request) -> Response:
    """The charts' series, oldest point first.

    Rates (``runs_*``, ``attempts_*``) are per minute; ``jobs_ready`` and
    ``jobs_delayed`` are the average number of jobs waiting over the point;
    ``start_lateness_ms`` and ``attempt_duration_ms`` hold the p50, p95 and p99 of
    the point (null without a sample). ``runs_failed`` counts failed runs only and
    ``runs_halted`` halted ones (halted is not failed); ``runs_finished`` counts
    every end. ``totals`` counts runs finished, failed and halted and attempts
    failed free and paid over the whole window.
    """
    from ductline.web.pages import chart_window

    name, pipeline = chart_window(request)
    shown = dashboard(request).charts.window(name, pipeline)
    return ApiResponse({"window": name, "pipeline": pipeline, "now": views.iso(shown.now_ms),
                        "pipelines": shown.pipelines, "totals": shown.totals,
                        "points": [_point(p) for p in shown.points]})
