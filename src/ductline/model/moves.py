"""Moving a run to another definition of its pipeline: the rule that decides
whether a run can move and what each of its jobs becomes.

A move renames steps by an operator's mapping (``old=new``; a step not named keeps
its name) and re-queues each job by the step's queue in the target definition. It is
refused, for the whole command, when a job that may still run -- waiting, running,
paused, waiting for an event, or failed or cancelled in a halted run that a retry revives -- would be left
with a step the target does not have: nothing could ever claim it. Completed and
skipped jobs are renamed when the mapping names their step and are otherwise kept as
they are: they are the run's record (a fan-in reads the outputs of completed steps by
their names in the target definition).
"""

from __future__ import annotations

from dataclasses import dataclass

from ductline.model.states import OPEN_JOB, REVIVABLE_JOB, JobStatus

# Jobs that may still run (or wait to, or be revived): each must have a step in the target.
MAY_RUN_JOB = OPEN_JOB | REVIVABLE_JOB


class MoveRefused(ValueError):
    """The mapping leaves a job without a step, or is not one-to-one."""


@dataclass(frozen=True, slots=True)
class JobMove:
    """What one job of a moved run becomes."""

    job_id: str
    step: str   # its step in the target definition
    queue: str  # that step's queue there ("" for a finished job whose step the target lacks)


def check_mapping(mapping: dict[str, str]) -> None:
    """A mapping renames each old step to one new step, and no two to the same one.

    Raises:
        MoveRefused: two old steps map to one new step.
    """
    seen: dict[str, str] = {}
    for old, new in sorted(mapping.items()):
        if new in seen:
            raise MoveRefused(f"the mapping sends both {seen[new]!r} and {old!r} to {new!r}")
        seen[new] = old


def plan_run(jobs: list[tuple[str, str, str]], mapping: dict[str, str],
             target: dict[str, str]) -> tuple[list[JobMove], list[str]]:
    """The moves of one run's jobs, and the steps its open jobs would lack.

    Args:
        jobs: ``(job_id, step, status)`` of every job of the run.
        mapping: ``{old step: new step}``.
        target: the target definition's queue of each step, by step name.

    Returns:
        ``(moves, missing)``: ``missing`` lists (sorted, once each) the steps of open
        jobs, after the mapping, that the target does not have; the move is refused
        when it is not empty.
    """
    moves: list[JobMove] = []
    missing: set[str] = set()
    for job_id, step, status in jobs:
        new = mapping.get(step, step)
        queue = target.get(new)
        if queue is None:
            if JobStatus(status) in MAY_RUN_JOB:
                missing.add(new)
            moves.append(JobMove(job_id, new, ""))
        else:
            moves.append(JobMove(job_id, new, queue))
    return moves, sorted(missing)
