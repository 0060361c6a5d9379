"""Line charts laid out for an SVG drawn on the server (``_chart.html``): no script,
no external resource, so the dashboard's strict Content-Security-Policy holds.

`charts` turns a `ductline.web.charts.Window` into the dashboard's five charts:
runs finished and failed per minute, failed attempts free and paid per minute,
ready and delayed jobs, start lateness and attempt duration percentiles (the last
two on a logarithmic axis: a p99 of minutes beside a p50 of milliseconds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Sequence

from ductline.web.charts import MINUTE_MS, PERCENTILES, Point, Window

WIDTH, HEIGHT = 560, 190
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 12, 26


@dataclass(frozen=True, slots=True)
class Mark:
    """A point of a line: where it is drawn and what its tooltip says."""

    x: float
    y: float
    title: str


@dataclass(slots=True)
class Line:
    """One series: its name (``data-series``), path and marks."""

    name: str
    label: str
    path: str
    marks: list[Mark]
    latest: str  # the value of its last point, for the legend
    points: int = 0  # points drawn (the window's points with a value)

    @property
    def count(self) -> int:
        return self.points


@dataclass(slots=True)
class Chart:
    """One chart: a title, its lines and the ticks of both axes."""

    key: str
    title: str
    note: str
    lines: list[Line]
    y_ticks: list[tuple[float, str]]
    x_ticks: list[tuple[float, str]]
    width: int = WIDTH
    height: int = HEIGHT
    plot: tuple[int, int, int, int] = (LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM)
    empty: bool = field(default=False)


def rate(value: float) -> str:
    """``12``, ``3.5``, ``0.25`` per minute; a whole count as a whole number (``4``, not ``4.0``)."""
    if value == int(value):
        return str(int(value))
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}" if value < 1 else f"{value:.1f}"


def millis(ms: float) -> str:
    """A duration in few characters: ``850ms``, ``4.2s``, ``3m``, ``2.5h``."""
    if ms < 1000:
        return f"{ms:.0f}ms"
    if ms < 60_000:
        return f"{ms / 1000:.3g}s"
    if ms < 3_600_000:
        return f"{ms / 60_000:.3g}m"
    return f"{ms / 3_600_000:.3g}h"


def _nice(top: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above ``top``."""
    if top <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(top))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= top:
            return float(step * power)
    return float(10 * power)  # pragma: no cover


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%H:%M")


def _x_ticks(w: Window, x: Callable[[int], float]) -> list[tuple[float, str]]:
    every = 10 if w.name == "hour" else 180  # minutes between labels
    ticks = []
    for i, p in enumerate(w.points):
        if (p.start // MINUTE_MS) % every == 0:
            ticks.append((x(i), _clock(p.start)))
    return ticks


def _chart(key: str, title: str, note: str, w: Window, series: Sequence[tuple[str, str, Callable[[Point], float | None]]],
           log: bool, show: Callable[[float], str]) -> Chart:
    left, top, right, bottom = LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM
    n = max(1, len(w.points) - 1)

    def x(i: int) -> float:
        return round(left + (right - left) * i / n, 1)

    values = [v for _, _, get in series for p in w.points if (v := get(p)) is not None]
    if log:
        low = 1.0
        high = 10 ** math.ceil(math.log10(max([10.0, *values])))
        span = math.log10(high) - math.log10(low)

        def y(v: float) -> float:
            return round(bottom - (bottom - top) * (math.log10(max(v, low)) - math.log10(low)) / span, 1)

        y_ticks = [(y(10.0 ** e), show(10.0 ** e)) for e in range(0, int(math.log10(high)) + 1)]
    else:
        step = _nice(max([0.0, *values]) / 4)  # about four steps of 1, 2, 2.5 or 5 times a power of ten
        if max(values, default=0) <= 0:
            step = 0.25
        high = step * max(1, math.ceil(max(values, default=0) / step))

        def y(v: float) -> float:
            return round(bottom - (bottom - top) * v / high, 1)

        y_ticks = [(y(step * k), show(step * k)) for k in range(int(round(high / step)) + 1)]
    lines = []
    for name, label, get in series:
        parts, marks, pen, drawn = [], [], "M", 0
        for i, p in enumerate(w.points):
            v = get(p)
            if v is None:  # no sample in this point: the line breaks
                pen = "M"
                continue
            parts.append(f"{pen}{x(i)},{y(v)}")
            pen = "L"
            drawn += 1
            if v:  # a dot with its tooltip where there is something (a row of zeros is the baseline)
                marks.append(Mark(x(i), y(v), f"{_clock(p.start)} {label}: {show(v)}"))
        last = w.points[-1] if w.points else None
        latest = get(last) if last is not None else None
        lines.append(Line(name, label, " ".join(parts), marks, "—" if latest is None else show(latest), drawn))
    return Chart(key, title, note, lines, y_ticks, _x_ticks(w, x), empty=not values)


def charts(w: Window) -> list[Chart]:
    """The dashboard's charts of one window."""
    per = "per minute" if w.name == "hour" else "per minute, averaged over 10 minutes"

    def pct(kind: str, p: int) -> Callable[[Point], float | None]:
        return lambda point: (point.lateness if kind == "lateness" else point.duration)[p]

    return [
        _chart("runs", "Runs finished, failed and halted",
               f"Runs that ended, {per} (finished: any end); failed: their deadline passed or a pause expired; "
               f"halted: a step gave up (not failed: they can be retried).", w,
               [("finished", "finished", lambda p: p.finished), ("failed", "failed", lambda p: p.failed),
                ("halted", "halted", lambda p: p.halted)],
               False, rate),
        _chart("failures", "Failed attempts: free and paid",
               f"Attempts that failed before their step crossed its boundary (free: retried) and after it "
               f"(paid: not retried), {per}.", w,
               [("free", "free", lambda p: p.free), ("paid", "paid", lambda p: p.paid)], False, rate),
        _chart("queue", "Ready and delayed jobs",
               "Jobs waiting, on average: ready (due, waiting for a worker) and delayed (not before a time).", w,
               [("ready", "ready", lambda p: p.ready), ("delayed", "delayed", lambda p: p.delayed)], False, rate),
        _chart("lateness", "Start lateness", "From a job's not-before time to its attempt's start "
               "(the latest attempt of each job), percentiles.", w,
               [(f"p{p}", f"p{p}", pct("lateness", p)) for p in PERCENTILES], True, millis),
        _chart("duration", "Attempt duration", "From an attempt's start to its end, percentiles.", w,
               [(f"p{p}", f"p{p}", pct("duration", p)) for p in PERCENTILES], True, millis),
    ]
