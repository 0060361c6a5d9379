"""The run graph: steps as nodes, transitions as edges, laid out for an SVG.

Drawn from the pipeline's `Definition` when the dashboard process imported the app
that defines it (``ductline dashboard --app``); otherwise from the step names
present in the run's jobs, in creation order. Each node carries the state of its
step runs; an expanded step is summarised with counts ("12/20 done").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ductline.dsl.backoff import Backoff
from ductline.dsl.graph import Definition, Node, TransitionKind
from ductline.dsl.timeouts import ScaledTimeout
from ductline.model.states import JobStatus

ON_HALT_STEP = "__on_halt__"
NODE_W, NODE_H = 196, 74
GAP_X, GAP_Y, PAD = 64, 26, 16


class Shown(StrEnum):
    """What the dashboard shows that is not a stored status: a pending job is ready,
    delayed (its not-before time is ahead) or throttled (its step's concurrency
    limit is reached); a step with no job yet is not reached."""

    READY = "ready"
    DELAYED = "delayed"
    THROTTLED = "throttled"
    NOT_REACHED = "not_reached"


# A step run's state on the dashboard: its job's status, a pending one told apart.
State = JobStatus | Shown

# Worst first: the node shows the most urgent state among its step runs.
_PRECEDENCE: tuple[State, ...] = (
    JobStatus.FAILED, JobStatus.PAUSED, JobStatus.RUNNING, JobStatus.AWAITING, JobStatus.HELD, Shown.READY,
    Shown.THROTTLED, Shown.DELAYED, JobStatus.DEFERRED, JobStatus.CANCELLED, JobStatus.COMPLETED, JobStatus.SKIPPED)
# The order of a node's progress bar: finished first, failed last.
_BAR_ORDER: tuple[State, ...] = (
    JobStatus.COMPLETED, JobStatus.SKIPPED, JobStatus.CANCELLED, JobStatus.RUNNING, JobStatus.AWAITING, Shown.READY,
    Shown.THROTTLED, Shown.DELAYED, JobStatus.DEFERRED, JobStatus.PAUSED, JobStatus.HELD, JobStatus.FAILED)
STATE_LABELS: dict[State, str] = {
    JobStatus.FAILED: "failed", JobStatus.PAUSED: "paused: waiting for resume", JobStatus.RUNNING: "running",
    JobStatus.AWAITING: "awaiting its child runs",
    JobStatus.HELD: "held (run halted)", JobStatus.DEFERRED: "waiting for an event", Shown.READY: "ready",
    Shown.THROTTLED: "throttled: waiting for a concurrency slot", Shown.DELAYED: "delayed",
    JobStatus.CANCELLED: "cancelled", JobStatus.COMPLETED: "completed", JobStatus.SKIPPED: "skipped",
    Shown.NOT_REACHED: "not reached",
}


@dataclass(slots=True)
class GraphNode:
    name: str
    label: str
    state: State
    summary: str
    counts: dict[State, int]
    expanded: bool
    x: int = 0
    y: int = 0
    w: int = NODE_W
    h: int = NODE_H
    not_before_ms: int | None = None
    detail: str = ""
    policy: str = ""         # "timeout 30s · 3 attempts": the node's third line
    policy_detail: str = ""  # the same in words, with the retry delay (its tooltip)

    @property
    def anchor(self) -> str:
        return "step-" + self.name

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def segments(self) -> list[tuple[State, int, int]]:
        """``(state, x, width)`` of a progress bar across the node, one per state."""
        total, x, out = self.total, 0, []
        inner = self.w - 24
        for state in _BAR_ORDER:
            n = self.counts.get(state, 0)
            if n and total:
                width = max(2, round(inner * n / total))
                out.append((state, x, width))
                x += width
        return out


@dataclass(slots=True)
class GraphEdge:
    source: str
    target: str
    label: str
    reached: bool
    path: str = ""
    label_x: int = 0
    label_y: int = 0


@dataclass(slots=True)
class RunGraph:
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    from_definition: bool
    width: int = 0
    height: int = 0
    states: list[State] = field(default_factory=list)


def job_state(job: dict[str, Any], now_ms: int) -> State:
    """One step run's state as the graph shows it (a pending job is ready, delayed or throttled)."""
    status = JobStatus(job["status"])
    if status is JobStatus.PENDING:
        if job.get("throttled"):
            return Shown.THROTTLED  # its step's concurrency limit is reached (ductline.store.claims)
        return Shown.DELAYED if int(job["not_before_ms"]) > now_ms else Shown.READY
    return status


def span(seconds: int | float | None) -> str:
    """A duration in few characters: ``45s``, ``5m``, ``1h30m``, ``2d``."""
    if seconds is None:
        return "?"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m" + (f"{s % 60}s" if s % 60 else "")
    if s < 86400:
        return f"{s // 3600}h" + (f"{s % 3600 // 60}m" if s % 3600 // 60 else "")
    return f"{s // 86400}d" + (f"{s % 86400 // 3600}h" if s % 86400 // 3600 else "")


def _timeout(timeout: int | ScaledTimeout | None) -> tuple[str, str]:
    if timeout is None:
        return "no timeout", "no step timeout"
    if isinstance(timeout, ScaledTimeout):
        return (f"timeout {span(timeout.floor)}–{span(timeout.cap)}",
                f"step timeout scaled by its input's size, from {span(timeout.floor)} to {span(timeout.cap)}")
    return f"timeout {span(timeout)}", f"step timeout {span(timeout)}"


def _retry_delay(delay: int | Backoff | None) -> str:
    if delay is None:
        return "the worker's retry delay (DUCTLINE_RETRY_DELAY)"
    if isinstance(delay, Backoff):
        cap = f", at most {span(delay.cap)}" if delay.cap is not None else ""
        jitter = f", jitter {delay.jitter:g}" if delay.jitter else ""
        return f"{delay.kind} backoff from {span(delay.base)}{cap}{jitter}"
    return span(delay)


def _attempts(max_retry: int) -> str:
    n = max(1, int(max_retry))  # max_retry is the attempt budget: 0 and 1 both mean one attempt
    return f"{n} attempt{'s' if n != 1 else ''}"


def policy(node: Node, start: bool) -> tuple[str, str]:
    """``(line, words)``: a step's timeout and attempt budget (and, for the first
    step, its start delay; other delays label the edge into the step)."""
    o = node.options
    timeout, timeout_words = _timeout(o.timeout)
    budget = _attempts(o.max_retry)
    delay = f"delay {span(o.delay)} · " if start and o.delay else ""
    words = [f"start delay {span(o.delay)}"] if start and o.delay else []
    words += [timeout_words, f"{budget} (errors and timeouts share them), retried after {_retry_delay(o.retry_delay)}",
              f"{o.max_crash} crash{'es' if o.max_crash != 1 else ''} allowed"]
    return f"{delay}{timeout} · {budget}", "; ".join(words)


def stored_policy(job: dict[str, Any]) -> tuple[str, str]:
    """`policy` from a job's stored limits, when the definition is not imported here."""
    timeout, timeout_words = _timeout(job.get("timeout_seconds"))
    if job.get("max_retry") is None:
        return "", ""
    budget = _attempts(int(job["max_retry"]))
    delay = job.get("retry_delay_seconds")
    words = f"{timeout_words}; {budget}" + (f", retried after {span(delay)}" if delay is not None else "")
    return f"{timeout} · {budget}", words


def _summarise(name: str, jobs: list[dict[str, Any]], now_ms: int, expanded: bool) -> GraphNode:
    label = "on_halt" if name == ON_HALT_STEP else name
    if not jobs:
        return GraphNode(name, label, Shown.NOT_REACHED, STATE_LABELS[Shown.NOT_REACHED], {}, expanded)
    counts = Counter(job_state(j, now_ms) for j in jobs)
    state = next(s for s in _PRECEDENCE if counts.get(s))
    delayed = [int(j["not_before_ms"]) for j in jobs if job_state(j, now_ms) is Shown.DELAYED]
    if expanded or len(jobs) > 1:
        summary = f"{counts.get(JobStatus.COMPLETED, 0)}/{len(jobs)} done"
        extra = [f"{n} {s}" for s, n in counts.items() if s is not JobStatus.COMPLETED and n]
        detail = ", ".join(extra)
    else:
        attempts = int(jobs[0]["attempts"])
        summary = STATE_LABELS[state] + (f" · {attempts} attempt{'s' if attempts != 1 else ''}" if attempts else "")
        detail = ""
    return GraphNode(name, label, state, summary, dict(counts), expanded or len(jobs) > 1,
                     not_before_ms=min(delayed) if state is Shown.DELAYED and delayed else None, detail=detail)


def _edge_label(kind: TransitionKind, route: str | None, delay: int) -> str:
    if kind is TransitionKind.DIVERT:
        label = f"{route}" if route else "divert"
    else:
        label = "" if kind is TransitionKind.CHAIN else kind.value
    if delay:  # the created step waits this long after its predecessor committed
        label = f"{label} · delay {span(delay)}" if label else f"delay {span(delay)}"
    return label


def build(definition: Definition | None, jobs: list[dict[str, Any]], now_ms: int) -> RunGraph:
    """Lay out the graph of one run.

    Args:
        definition: the pipeline's definition, or ``None`` when it is not imported here.
        jobs: the run's jobs (`Store.run_jobs` rows), in creation order.
        now_ms: the database clock, to tell ready from delayed.
    """
    by_step: dict[str, list[dict[str, Any]]] = {}
    for job in jobs:
        by_step.setdefault(str(job["step"]), []).append(job)
    edges: list[GraphEdge] = []
    if definition is not None:
        names = list(definition.nodes)
        nodes = {n: _summarise(n, by_step.get(n, []), now_ms, definition.nodes[n].depth > 0) for n in names}
        for name, shown in nodes.items():
            shown.policy, shown.policy_detail = policy(definition.nodes[name], name == definition.start)
        for node in definition.nodes.values():
            if node.next is None:
                continue
            routes = node.next.routes or (None,) * len(node.next.targets)
            for target, route in zip(node.next.targets, routes):
                delay = definition.nodes[target].options.delay if target in definition.nodes else 0
                edges.append(GraphEdge(node.name, target, _edge_label(node.next.kind, route, delay),
                                       bool(by_step.get(target))))
        # Steps the definition does not know (an older version of the pipeline) still show.
        for step in by_step:
            if step not in nodes and step != ON_HALT_STEP:
                nodes[step] = _summarise(step, by_step[step], now_ms, False)
                nodes[step].policy, nodes[step].policy_detail = stored_policy(by_step[step][0])
    else:
        names = [s for s in by_step if s != ON_HALT_STEP]
        nodes = {n: _summarise(n, by_step[n], now_ms, False) for n in names}
        for name, shown in nodes.items():
            shown.policy, shown.policy_detail = stored_policy(by_step[name][0])
        edges = [GraphEdge(a, b, "", True) for a, b in zip(names, names[1:])]
    graph = RunGraph(list(nodes.values()), edges, definition is not None)
    _layout(graph, list(nodes))
    if ON_HALT_STEP in by_step:  # the halt handler hangs below the graph, unconnected
        handler = _summarise(ON_HALT_STEP, by_step[ON_HALT_STEP], now_ms, False)
        if definition is not None and definition.on_halt is not None:
            handler.policy, handler.policy_detail = policy(definition.on_halt, False)
        else:
            handler.policy, handler.policy_detail = stored_policy(by_step[ON_HALT_STEP][0])
        handler.x, handler.y = PAD, graph.height
        graph.nodes.append(handler)
        graph.height += NODE_H + GAP_Y
    graph.states = [s for s in (*_PRECEDENCE, Shown.NOT_REACHED) if any(n.state == s for n in graph.nodes)]
    return graph


def _layout(graph: RunGraph, order: list[str]) -> None:
    """Left to right: a node's column is its longest distance from a source, so every
    edge points right; within a column nodes follow their parents' rows."""
    parents: dict[str, list[str]] = {n: [] for n in order}
    children: dict[str, list[str]] = {n: [] for n in order}
    for e in graph.edges:
        if e.source in parents and e.target in parents:
            parents[e.target].append(e.source)
            children[e.source].append(e.target)
    column: dict[str, int] = {}
    remaining = {n: len(parents[n]) for n in order}
    ready = [n for n in order if remaining[n] == 0]
    while ready:
        name = ready.pop(0)
        column[name] = max((column[p] + 1 for p in parents[name]), default=0)
        for child in children[name]:
            remaining[child] -= 1
            if remaining[child] == 0:
                ready.append(child)
    for name in order:  # a cycle cannot come from a Definition; never lose a node anyway
        column.setdefault(name, max(column.values(), default=-1) + 1)
    columns: dict[int, list[str]] = {}
    for name in order:
        columns.setdefault(column[name], []).append(name)
    row: dict[str, float] = {}
    for c in sorted(columns):
        members = columns[c]
        members.sort(key=lambda n: (sum(row[p] for p in parents[n]) / len(parents[n]) if parents[n] else 0.0,
                                    order.index(n)))
        for i, name in enumerate(members):
            row[name] = float(i)
    tallest = max((len(m) for m in columns.values()), default=1)
    height = tallest * NODE_H + (tallest - 1) * GAP_Y
    position = {n.name: n for n in graph.nodes}
    for c, members in columns.items():
        top = PAD + (height - (len(members) * NODE_H + (len(members) - 1) * GAP_Y)) // 2
        for i, name in enumerate(members):
            node = position[name]
            node.x = PAD + c * (NODE_W + GAP_X)
            node.y = top + i * (NODE_H + GAP_Y)
    for e in graph.edges:
        a, b = position[e.source], position[e.target]
        x1, y1 = a.x + a.w, a.y + a.h // 2
        x2, y2 = b.x - 6, b.y + b.h // 2
        bend = max(24, (x2 - x1) // 2)
        e.path = f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"
        e.label_x, e.label_y = (x1 + x2) // 2, (y1 + y2) // 2 - 6
    graph.width = PAD * 2 + (max(column.values(), default=0) + 1) * (NODE_W + GAP_X) - GAP_X
    graph.height = PAD * 2 + height
