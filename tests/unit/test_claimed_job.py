"""`ClaimedJob.starting`: a job claimed ahead keeps everything but its start and deadlines."""

from __future__ import annotations

import dataclasses

from ductline.store.records import ClaimedJob


def test_starting_changes_the_start_and_deadlines_only() -> None:
    job = ClaimedJob("j", "r", "p", "s", "0", "[1]", 2, "t", 30, "b", 5, 6, 7, 8, "k", 9, 1)
    started = job.starting(100, 200, 300)
    assert started == dataclasses.replace(job, started_ms=100, deadline_ms=200, run_deadline_ms=300)
    # Every field is carried: one added to ClaimedJob without `starting` fails here.
    assert {f.name for f in dataclasses.fields(ClaimedJob)} - {"started_ms", "deadline_ms", "run_deadline_ms"} \
        == {n for n in (f.name for f in dataclasses.fields(ClaimedJob)) if getattr(started, n) == getattr(job, n)}
