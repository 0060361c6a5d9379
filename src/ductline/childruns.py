"""Child runs: what a step returns to start runs of other pipelines and wait for
them (`children`, `child`), and what a failed child stands for in the outputs its
parent receives (`ChildRunFailed`). docs/howto/child-runs.md tells the whole story.

A step returns ``ductline.children([...])``; its value is encoded in the step's child
process like any output (a tagged JSON object, `ductline.codec`), and the worker that
records the attempt starts the child runs in the same transaction, keyed by the
parent job and each child's index, so a retried or rescued step never starts them
twice. The parent's step run then waits in one row (status ``awaiting``: no slot,
no lease) until its last child run ends; its output becomes the list of the
children's outputs in the order given, and the run goes on from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FAIL = "fail"
COLLECT = "collect"
POLICIES = (FAIL, COLLECT)
MAX_CHILDREN = 10_000


@dataclass(frozen=True, slots=True)
class ChildRun:
    """One child run to start: a pipeline by name, its arguments, and optionally its
    own whole-run timeout in seconds (else the child pipeline's)."""

    pipeline: str
    args: tuple[Any, ...]
    timeout_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class ChildRuns:
    """What `children` returns; a step returns it (it is encoded by `ductline.codec`
    with the tag ``children``)."""

    runs: tuple[ChildRun, ...]
    on_failure: str = FAIL

    __ductline_tag__ = "children"

    def ductline_fields(self) -> dict[str, Any]:
        """The fields the codec encodes (arguments under the value rule)."""
        return {"on_failure": self.on_failure,
                "runs": [{"pipeline": r.pipeline, "args": list(r.args), "timeout_seconds": r.timeout_seconds}
                         for r in self.runs]}


@dataclass(frozen=True, slots=True)
class ChildRunFailed:
    """A child run that did not complete, in the list its parent receives under
    ``on_failure="collect"``, in its place.

    Attributes:
        run_id: the child run's id.
        pipeline: its pipeline's name.
        status: ``"halted"``, ``"failed"`` or ``"cancelled"``.
        reason: its halt reason, ``"timeout_exceeded"``, or ``None``.
        error: the error that ended it, as text, or ``None``.
    """

    run_id: str
    pipeline: str
    status: str
    reason: str | None = None
    error: str | None = field(default=None)

    __ductline_tag__ = "child_failed"

    def ductline_fields(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "pipeline": self.pipeline, "status": self.status, "reason": self.reason,
                "error": self.error}


def child(pipeline: Any, *args: Any, timeout: Any = None) -> ChildRun:
    """One child run for `children`: a run of ``pipeline`` with ``args``.

    Args:
        pipeline: a `ductline.Pipeline` or a pipeline's name (``str``); the worker
            recording the parent's attempt must have it loaded.
        *args: the child's first step's arguments, under the value rule
            (docs/howto/payloads.md); with a `ductline.Pipeline` they are checked
            against its first step's signature here.
        timeout: the child's whole-run deadline (``int`` seconds or a whole-second
            ``timedelta``) instead of its pipeline's.

    Raises:
        TypeError: ``pipeline`` is neither a pipeline nor a ``str``, ``timeout`` is
            not a duration, or the arguments do not bind to the first step.
        ValueError: ``timeout`` is zero or negative.
    """
    from ductline.dsl.pipeline import PipelineBuilder
    from ductline.durations import optional_seconds

    if isinstance(pipeline, PipelineBuilder):
        from ductline.dsl.steps import check_arguments

        definition = pipeline.definition()
        start = definition.node(definition.start)
        check_arguments(start.func, args, start.name)
        name = pipeline.name
    elif isinstance(pipeline, str) and pipeline:
        name = pipeline
    else:
        raise TypeError(f"child() takes a Pipeline or a pipeline's name, not {type(pipeline).__name__}")
    return ChildRun(name, tuple(args), optional_seconds(timeout, field="timeout", allow_zero=False))


def children(runs: Any, *, on_failure: str = FAIL) -> ChildRuns:
    """Start child runs and wait for them; a step returns this.

    The step's run waits without holding a slot; once every child run has ended,
    the step's output is the list of their outputs, in the order of ``runs``, and
    the run goes on to the next step with it. A child run that did not complete
    (halted, failed or cancelled) counts as ended.

    Args:
        runs: a list of `child` values (or ``(pipeline, args_tuple)`` pairs), at
            most 10,000.
        on_failure: ``"fail"`` (default): if any child run did not complete, the
            step fails without a retry and its run halts with reason
            ``child_run_failed``. ``"collect"``: the step completes all the same,
            and each child that did not complete is a `ChildRunFailed` in the list.

    Raises:
        TypeError: ``runs`` is not a list of `child` values or pairs.
        ValueError: an unknown ``on_failure``, or more than 10,000 runs.
    """
    if on_failure not in POLICIES:
        raise ValueError(f"on_failure must be 'fail' or 'collect', got {on_failure!r}")
    if not isinstance(runs, (list, tuple)):
        raise TypeError(f"children() takes a list of child(...) values, not {type(runs).__name__}")
    if len(runs) > MAX_CHILDREN:
        raise ValueError(f"children() takes at most {MAX_CHILDREN} runs, got {len(runs)}")
    made: list[ChildRun] = []
    for i, run in enumerate(runs):
        if isinstance(run, ChildRun):
            made.append(run)
        elif isinstance(run, tuple) and len(run) == 2 and isinstance(run[1], tuple):
            made.append(child(run[0], *run[1]))
        else:
            raise TypeError(f"children(): run {i} is a {type(run).__name__}; give child(pipeline, *args) values")
    return ChildRuns(tuple(made), on_failure)
