"""The in-memory state of one in-process run: its status, its step runs keyed
``(step, scope)`` as a worker keys its jobs, fan-in counts, context values, and
what halted or stopped it.

Run status changes go through `RunState.move`, guarded by the rulebook's
`run_may_move`: a move the worker's store would refuse does not happen here either.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

from ductline.dsl.graph import Definition
from ductline.local.steprun import StepRun, utcnow
from ductline.model import scopes
from ductline.model.routing import JobSpec
from ductline.model.states import TERMINAL_JOB, HaltReason, JobStatus, RunStatus, run_may_move


@dataclass(frozen=True, slots=True)
class Halt:
    """Why the run halted: ``step_run`` failed for good with ``reason``."""

    reason: HaltReason
    step_run: StepRun
    detail: str | None

    def details(self) -> dict[str, Any]:
        """The halt as the ``on_halt`` handler receives it (one element of its list)."""
        return {"reason": self.reason.value, "step": self.step_run.name, "error": self.detail}


class RunState:
    """Everything one in-process run knows; the parts of the executor share it."""

    def __init__(self, definition: Definition, run_id: str) -> None:
        self.definition = definition
        self.run_id = run_id
        self.status = RunStatus.PENDING
        self.step_runs: dict[tuple[str, str], StepRun] = {}
        # Fan-ins by (step, scope): [expected arrivals, arrivals so far]. An expand
        # opens its collapse's with the element count; a combine's first arrival
        # opens its own with the branch count.
        self.fanins: dict[tuple[str, str], list[int]] = {}
        self.values: dict[str, str] = {}  # ductline.context() get/set, as JSON text
        self.halt: Halt | None = None
        self.halt_reason: HaltReason | None = None
        self.metadata: dict[str, Any] = {}  # merged from the stop that ended the run
        self.stopped: list[str] = []  # step runs whose attempts a stop ended (labels)
        self.output: Any = None
        self.deadline_at: datetime | None = None  # wall-clock run deadline, once it started
        order = {name: i for i, name in enumerate(definition.nodes)}
        if definition.on_halt is not None:
            order[definition.on_halt.name] = len(order)
        self._order = order

    def move(self, to: RunStatus) -> bool:
        """Move the run to ``to`` if the rulebook allows it from where it is;
        returns whether it moved."""
        if not run_may_move(self.status, to):
            return False
        self.status = to
        return True

    def create(self, step: str, scope: str, input_json: str, spec: JobSpec, status: JobStatus,
               clock_now: float) -> StepRun:
        """Record a new step run.

        Raises:
            AssertionError: the step run exists (each is created once).
        """
        key = (step, scope)
        if key in self.step_runs:
            raise AssertionError(f"step run {step}[{scope}] created twice")
        run = StepRun(self.definition.node(step), scope, input_json, spec, uuid.uuid4().hex, status,
                      created_at=clock_now)
        if status in TERMINAL_JOB:
            run.finished_at = utcnow()
        self.step_runs[key] = run
        return run

    def ordered(self) -> list[StepRun]:
        """Step runs in declaration order, then element order."""
        return sorted(self.step_runs.values(),
                      key=lambda sr: (self._order[sr.name], scopes.sort_key(sr.scope)))

    def with_status(self, statuses: Iterable[JobStatus]) -> list[StepRun]:
        wanted = frozenset(statuses)
        return [sr for sr in self.ordered() if sr.status in wanted]

    def open_fanin(self, step: str, scope: str, expected: int) -> None:
        self.fanins[(step, scope)] = [expected, 0]

    def arrive(self, step: str, scope: str, expected: int | None) -> int | None:
        """Count one arrival at the fan-in ``(step, scope)``; returns the number of
        arrivals it expects if this one completes it, else ``None``."""
        counts = self.fanins.setdefault((step, scope), [expected or 0, 0])
        counts[1] += 1
        return counts[0] if counts[1] == counts[0] else None
