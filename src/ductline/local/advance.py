"""Applying the rulebook's routing (`ductline.model.routing`) in memory: the step
runs a completion creates, the fan-ins it opens or counts, and the run's
completion.

A new step run starts as the rulebook says (`initial_status`): pending while the run
advances (its task waits out the step's delay), held once the run halted, paused
before a ``.pause(before=)``.
"""

from __future__ import annotations

from typing import Callable

from ductline import codec
from ductline.local.clock import Clock
from ductline.local.state import RunState
from ductline.local.steprun import StepRun
from ductline.model import scopes
from ductline.model.routing import Gather, gathered_args, initial_status, job_spec, route
from ductline.model.states import JobStatus, RunStatus


class Router:
    """Creates step runs for one run.

    Args:
        state: the run.
        clock: the executor's clock (a step run's creation time).
        retry_delay: seconds between a failed attempt and the next, for steps
            that set no ``retry_delay``.
        launch: starts the task of a pending step run after a delay in seconds.
        paused: called for a step run created paused.
    """

    def __init__(self, state: RunState, clock: Clock, retry_delay: float,
                 launch: Callable[[StepRun, float], None], paused: Callable[[StepRun], None]) -> None:
        self.state = state
        self.clock = clock
        self.retry_delay = retry_delay
        self.launch = launch
        self.paused = paused

    def advance(self, sr: StepRun) -> None:
        """Move the output of ``sr`` (just completed) on."""
        assert sr.output_json is not None
        routing = route(self.state.definition, sr.name, sr.scope, sr.output_json, lambda: sr.output)
        if routing.completes_run:
            # Only a running run completes (a halted one waits for its retry).
            if self.state.move(RunStatus.COMPLETED):
                self.state.output = sr.output
            return
        if routing.opens is not None:
            self.state.open_fanin(*routing.opens)
        for create in routing.creates:
            self.create(create.step, create.scope, create.args)
        if routing.gather is not None:
            self._arrive(routing.gather)

    def _arrive(self, gather: Gather) -> None:
        expected = self.state.arrive(gather.target, gather.scope, gather.expected)
        if expected is None:
            return
        runs = self.state.step_runs
        if gather.elements:  # a collapse: the elements' outputs in element order
            keys = [(gather.sources[0], scopes.child(gather.scope, i)) for i in range(expected)]
        else:  # a combine: the branches' outputs in to= order
            keys = [(source, gather.scope) for source in gather.sources]
        outputs = [runs[key].output_json for key in keys]
        self.create(gather.target, gather.scope, gathered_args([o for o in outputs if o is not None]))

    def create(self, step: str, scope: str, args: str, *, status: JobStatus | None = None,
               launch: bool = True) -> StepRun:
        """Create the step run ``(step, scope)`` with input ``args`` (a JSON list).

        Args:
            status: its status, instead of the rulebook's initial one (the
                ``on_halt`` handler starts pending in a halted run).
            launch: start its task if it is pending (the start step's task is
                started by the engine once children are warm).
        """
        spec = job_spec(self.state.definition, step, scope, args, self.retry_delay)
        status = initial_status(spec, self.state.status) if status is None else status
        sr = self.state.create(step, scope, args, spec, status, self.clock.now())
        if status is JobStatus.PENDING and launch:
            self.launch(sr, spec.delay_ms / 1000)
        elif status is JobStatus.PAUSED:
            self.paused(sr)
        return sr

    def on_halt_input(self, details: dict[str, object]) -> str:
        """The ``on_halt`` handler's input: one argument, the list of halt reasons."""
        return codec.dumps([[details]], what="on_halt reasons")
