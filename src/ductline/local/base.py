"""State shared by the parts of an in-process run (`ductline.local.engine.Run`):
step runs, fan-in counts, context values, halt and stop flags, and the helpers that
create step runs, skip them and report events."""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from datetime import datetime
from typing import Any, Protocol

from ductline.dsl.graph import Definition, TransitionKind
from ductline.local.childapps import child_setup
from ductline.local.children import Pool
from ductline.local.gates import Gate
from ductline.local.state import Outcome, Scope, StepRun, scope_key, scope_text, utcnow
from ductline.local.tracing import Tracing

log = logging.getLogger("ductline.local")

ON_HALT = "__on_halt__"
WORKFLOW_TIMEOUT = "workflow timeout"


class Clock(Protocol):
    """Time as the executor sees it for delays and retry delays (injectable, so
    tests can shorten them). The run deadline always uses the event loop's time."""

    async def sleep(self, seconds: float) -> None: ...

    def now(self) -> float: ...


class RealClock:
    """The default clock: ``asyncio.sleep`` and the event loop's monotonic time."""

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def now(self) -> float:
        return asyncio.get_running_loop().time()


class RunBase:
    """The state of one in-process run of a definition."""

    def __init__(self, definition: Definition, args_json: str, *, timeout: float | None,
                 on_update: Any, clock: Clock, concurrency: int, retry_delay: float,
                 kill_grace: float, tracing: Tracing) -> None:
        self.d = definition
        self.args_json = args_json
        self.timeout = timeout
        self.on_update = on_update
        self.clock = clock
        self.retry_delay = retry_delay
        self.kill_grace = kill_grace
        self.tracing = tracing
        self.run_id = uuid.uuid4().hex
        self.children = child_setup(definition)
        self.pool = Pool(self.children.apps, self.children.sys_path, concurrency, kill_grace)
        self.thread_slots = asyncio.Semaphore(concurrency)
        self.order = {name: i for i, name in enumerate(definition.nodes)}
        self.order[ON_HALT] = len(self.order)
        self.expand_of = {node.next.collapse: node.name for node in definition.nodes.values()
                          if node.next is not None and node.next.kind is TransitionKind.EXPAND}
        self.runs: dict[tuple[str, Scope], StepRun] = {}
        self.fanins: dict[tuple[str, Scope], int] = {}   # arrivals so far
        self.values: dict[str, str] = {}                  # ductline.context() get/set
        self.tasks: set[asyncio.Task[None]] = set()
        self.gates: dict[str, Gate] = {}  # concurrency/rate limits, by limit key
        self.idle = asyncio.Event()
        self.bug: BaseException | None = None
        self.halt: dict[str, Any] | None = None
        self.halt_root: StepRun | None = None
        self.halt_text = ""
        self.stopped: str | None = None                   # "timeout", "cancelled", "error"
        self.at_deadline: list[StepRun] = []              # running when the deadline fired
        self.on_halt_run: StepRun | None = None
        self.last: StepRun | None = None
        self.deadline_at: datetime | None = None
        self.span: Any = None

    def _create(self, step: str, scope: Scope, input_json: str) -> StepRun:
        key = (step, scope)
        if key in self.runs:  # pragma: no cover - each step run is created once
            raise AssertionError(f"step run {step}[{scope_text(scope)}] created twice")
        sr = StepRun(self.d.node(step), scope, input_json, uuid.uuid4().hex)
        self.runs[key] = sr
        return sr

    def _skip(self, sr: StepRun, reason: str) -> None:
        sr.status, sr.skip_reason, sr.finished_at = "skipped", reason, utcnow()
        self._emit({"type": "step_end", **self._ident(sr), "attempt": sr.attempts, "status": "skipped",
                    "result": None, "skip_reason": reason})

    def _end_attempt(self, sr: StepRun, outcome: Outcome) -> None:
        self.tracing.end_attempt(sr.span, outcome.result, outcome.error_type, outcome.error)
        sr.span = None
        self._emit({"type": "step_end", **self._ident(sr), "attempt": sr.attempts, "status": sr.status,
                    "result": outcome.result, "error_type": outcome.error_type, "error": outcome.error,
                    "duration_seconds": self.clock.now() - sr.attempt_started})

    def _ordered(self) -> list[StepRun]:
        return sorted(self.runs.values(), key=lambda sr: (self.order[sr.name], scope_key(sr.scope)))

    def _ident(self, sr: StepRun) -> dict[str, Any]:
        return {"step": sr.name, "index": sr.index, "scope": scope_text(sr.scope)}

    def _emit(self, event: dict[str, Any]) -> None:
        if self.on_update is None:
            return
        event = {"run_id": self.run_id, "pipeline": self.d.name, "time": utcnow(), **event}
        try:
            returned = self.on_update(event)
        except Exception:
            log.exception("on_update raised on a %s event; ignored", event["type"])
            return
        if inspect.isawaitable(returned):
            if inspect.iscoroutine(returned):
                returned.close()
            log.error("on_update must be a plain function; the awaitable it returned was dropped")

    # Defined by the parts that make up `ductline.local.engine.Run`:
    def _spawn(self, step: str, scope: Scope, input_json: str) -> None:
        raise NotImplementedError  # pragma: no cover - see engine.Run

    def _advance(self, sr: StepRun) -> None:
        raise NotImplementedError  # pragma: no cover - see flow.Flow
