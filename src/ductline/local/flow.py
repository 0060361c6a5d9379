"""Moving outputs on after a step run completed (the rules of
`ductline.runtime.advance`), skipping what can no longer run, and the result."""

from __future__ import annotations

from collections import deque

from ductline import codec
from ductline.dsl.graph import TransitionKind
from ductline.local.base import WORKFLOW_TIMEOUT, RunBase
from ductline.local.results import StepResult, WorkflowResult
from ductline.local.state import Scope, StepRun, scope_text, successors


class Flow(RunBase):
    """Fan-out, fan-in, cascade skips and the final `WorkflowResult`."""

    def _advance(self, sr: StepRun) -> None:
        transition = sr.node.next
        if sr is self.on_halt_run:
            return
        if transition is None:
            self.last = sr
            return
        scope, out = sr.scope, sr.output_json
        kind = transition.kind
        if kind in (TransitionKind.CHAIN, TransitionKind.CONVERGE, TransitionKind.DIVIDE):
            for target in transition.targets:
                self._spawn(target, scope, f"[{out}]")
        elif kind is TransitionKind.DIVERT:
            key = str(sr.output)
            routes = transition.routes
            index = routes.index(key) if key in routes else routes.index("otherwise")
            self._spawn(transition.targets[index], scope, f"[{out}]")
        elif kind is TransitionKind.EXPAND:
            assert transition.collapse is not None
            elements = sr.output
            if not elements:  # a collapse fires exactly once, also for zero elements
                self._spawn(transition.collapse, scope, "[[]]")
            for i, element in enumerate(elements):
                self._spawn(transition.targets[0], scope + (i,), f"[{codec.dumps(element)}]")
        elif kind is TransitionKind.COLLAPSE:
            target, outer = transition.targets[0], scope[:-1]
            source = self.runs[(self.expand_of[target], outer)]
            expected = len(source.output)
            if self._arrive(target, outer, expected):
                outputs = [self.runs[(sr.name, outer + (i,))].output_json for i in range(expected)]
                self._spawn(target, outer, "[[" + ",".join(outputs) + "]]")  # type: ignore[arg-type]
        elif kind is TransitionKind.COMBINE:
            target, sources = transition.targets[0], transition.sources
            if self._arrive(target, scope, len(sources)):
                outputs = [self.runs[(s, scope)].output_json for s in sources]
                self._spawn(target, scope, "[[" + ",".join(outputs) + "]]")  # type: ignore[arg-type]

    def _arrive(self, target: str, scope: Scope, expected: int) -> bool:
        count = self.fanins.get((target, scope), 0) + 1
        self.fanins[(target, scope)] = count
        return count == expected

    def _cascade(self) -> None:
        """Skip every step run that would have followed one that did not complete
        (a breadth-first walk over the graph that never touches an existing step run)."""
        roots = [sr for sr in self._ordered() if sr.status in ("failed", "skipped", "cancelled")
                 and sr is not self.on_halt_run]
        if self.halt_root in roots:
            roots.remove(self.halt_root)
            roots.insert(0, self.halt_root)
        queue = deque((sr, self._cascade_reason(sr)) for sr in roots)
        while queue:
            sr, reason = queue.popleft()
            for step, scope in successors(self.d, sr.name, sr.scope):
                if (step, scope) in self.runs:
                    continue
                skipped = self._create(step, scope, "[]")
                self._skip(skipped, reason)
                queue.append((skipped, reason))

    def _cascade_reason(self, sr: StepRun) -> str:
        if sr.status == "skipped":
            return sr.skip_reason or "skipped"
        if sr.status == "cancelled":
            return "cancelled"
        if sr in self.at_deadline:
            return WORKFLOW_TIMEOUT
        return self.halt_text if sr is self.halt_root else f"step {sr.label()!r} failed"

    def _result(self, timed_out: bool, duration: float) -> WorkflowResult:
        steps = [StepResult(
            step=sr.name, index=sr.index, status=sr.status,  # type: ignore[arg-type]
            output=sr.output if sr.status == "completed" else None, error_type=sr.error_type,
            error=sr.error, skip_reason=sr.skip_reason, attempts=sr.attempts, started_at=sr.started_at,
            finished_at=sr.finished_at, scope=scope_text(sr.scope),
        ) for sr in self._ordered()]
        success = not timed_out and self.halt is None and self.last is not None
        error = error_type = None
        if timed_out:
            running = [sr.label() for sr in self.at_deadline]
            error = f"the run exceeded its timeout of {self.timeout:g} s (workflow timeout)"
            if running:
                error += "; stopped: " + ", ".join(repr(name) for name in running)
            error_type = "TimeoutError"
        elif self.halt is not None:
            root = self.halt_root
            assert root is not None
            error = f"step {root.label()!r} failed: {root.error_type}: {self.halt['error']} ({self.halt['reason']})"
            error_type = root.error_type
        elif not success:  # pragma: no cover - a validated graph always reaches its last step
            error = "the run ended without completing its last step"
        return WorkflowResult(
            overall_status="success" if success else "failed", steps=steps,
            metadata={
                "run_id": self.run_id, "pipeline": self.d.name, "timeout_exceeded": timed_out,
                "timeout_seconds": self.timeout, "error": error, "error_type": error_type,
                "output": self.last.output if success and self.last is not None else None,
                "halt_reason": None if self.halt is None else self.halt["reason"],
                "failed_step": None if self.halt is None else self.halt["step"],
                "duration_seconds": duration,
            })
