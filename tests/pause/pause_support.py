"""Driving pause pipelines in the test process: claim jobs with `Store.claim` and
record their outcomes with `ductline.runtime.record`, against a real database
(import as `pause_support`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ductline import codec
from ductline.dsl.pipeline import Pipeline
from ductline.runtime import record
from ductline.store import Store

APP = str(Path(__file__).parents[1] / "apps" / "pause_app.py")
WORKER = "pause-test-worker"


def drive(store: Store, pipeline: Pipeline, skip: tuple[str, ...] = ()) -> list[str]:
    """Run every ready job of ``pipeline`` in this process (each step's function is
    called with its stored input) until none is ready; returns the steps run."""
    definition = pipeline.definition()
    ran: list[str] = []
    while True:
        jobs = [j for j in store.claim(WORKER, [pipeline.name], 10, 60_000)]
        if not jobs:
            return ran
        for job in jobs:
            if job.step in skip:
                continue
            node = definition.node(job.step)
            output = codec.dumps(node.func(*codec.loads(job.input)))
            with store.transaction() as tx:
                done = record.success(tx, definition, record.Attempt(
                    job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token), output, 0)
            assert done.outcome == "completed", done
            ran.append(job.step)


def jobs_by_step(store: Store, run_id: str) -> dict[str, dict[str, Any]]:
    return {j["step"]: j for j in store.run_jobs(run_id)}
