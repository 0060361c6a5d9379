"""One attempt as the in-process driver follows it: from its claim to the record
the engine takes (`ductline.engine.batch.Outcome`).

Its limit is set as it begins (`begin`): its step timeout (a scaled one starts at
its floor) and the run deadline, whichever comes first, in real time. An attempt
killed at the run deadline ends the whole run, as on a worker.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ductline import codec
from ductline.dsl.graph import Node, TransitionKind
from ductline.engine.batch import Outcome as Recording
from ductline.engine.record import Attempt
from ductline.local.attempts import Started
from ductline.local.outcome import Limit, Outcome
from ductline.model.states import AttemptResult
from ductline.store.records import ClaimedJob


@dataclass(eq=False, slots=True)
class Running:
    """A claimed job whose attempt the driver runs."""

    job: ClaimedJob
    task: asyncio.Task[None] | None = None
    started: Started | None = None
    begun_ms: int | None = None     # on the store's clock
    clock_began: float = 0.0        # on the driver's clock
    outcome: Outcome | None = None
    lost: bool = False  # a stop took its lease: already reported, never recorded

    def begin(self, node: Node, run_bound: float | None, store_now_ms: int, clock_now: float) -> Started:
        """The attempt begins now; ``run_bound``: the loop time of the run deadline."""
        loop_now = asyncio.get_running_loop().time()
        timeout: Any = node.options.timeout
        floor: float | None = getattr(timeout, "floor", timeout)
        seconds = None if floor is None else float(floor)
        if run_bound is not None:
            seconds = run_bound - loop_now if seconds is None else min(seconds, run_bound - loop_now)
        self.started = Started(loop_now, Limit(loop_now, seconds), run_bound)
        self.begun_ms = store_now_ms
        self.clock_began = clock_now
        return self.started

    @property
    def killed_at_run_deadline(self) -> bool:
        """It timed out at the run deadline, not at its own step timeout."""
        started, outcome = self.started, self.outcome
        return (outcome is not None and outcome.result is AttemptResult.TIMED_OUT and started is not None
                and started.run_bound is not None and started.limit.at is not None
                and started.limit.at >= started.run_bound - 1e-6)

    def recording(self, node: Node) -> Recording:
        """What the engine records of the finished attempt."""
        job, outcome = self.job, self.outcome
        assert outcome is not None
        attempt = Attempt(job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token,
                          self.begun_ms, job.limit_key, self._ran_under())
        return Recording(attempt, job.pipeline, outcome.result, outcome.output, outcome.error_type, outcome.error,
                         outcome.traceback, run_deadline=self.killed_at_run_deadline,
                         route_key=outcome.route_key or _route_key(node, outcome.output))

    def _ran_under(self) -> int | None:
        """The deadline the attempt ran under, on the store's clock."""
        if self.started is None or self.started.limit.seconds is None or self.begun_ms is None:
            return self.job.deadline_ms
        return int(self.begun_ms + self.started.limit.seconds * 1000)


def _route_key(node: Node, output: str | None) -> str | None:
    """``str(output)`` for a divert: this process is the caller's own, where a user
    type may be built (a worker parent never does: its child renders it)."""
    if output is None or node.next is None or node.next.kind is not TransitionKind.DIVERT:
        return None
    return codec.render(codec.loads(output), "route key")
