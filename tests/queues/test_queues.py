"""Queues: a step names the queue its jobs wait in; a worker claims only the queues it
serves; the claim reads only those queues' part of the ready index."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ductline import Pipeline, execute
from ductline.config import load_settings
from ductline.errors import ConfigurationError
from ductline.store import open_store, queries
from tests.apps import queue_app
from tests.helpers import drive, wait_for

APP = str(Path(__file__).parents[1] / "apps" / "queue_app.py")


def step(x):
    return x


# -- the DSL -----------------------------------------------------------------------------


def test_a_step_takes_its_own_queue_or_the_pipelines() -> None:
    definition = queue_app.rendering.definition()
    assert [definition.queue_of(s) for s in ("prepare", "render", "report")] == ["default", "gpu", "default"]
    assert definition.queues == ["default", "gpu"]
    licensed = queue_app.licensed.definition()
    assert [licensed.queue_of(s) for s in ("prepare", "report")] == ["licence", "default"]


@pytest.mark.parametrize("bad, error", [(3, TypeError), ("", ValueError), ("has space", ValueError),
                                        ("x" * 101, ValueError), ("-lead", ValueError)])
def test_a_queue_name_is_checked_at_definition_time(bad: Any, error: type) -> None:
    with pytest.raises(error, match="queue"):
        Pipeline("q_bad_step").start(step, queue=bad)
    with pytest.raises(error, match="queue"):
        Pipeline("q_bad_pipeline", queue=bad)


def test_worker_queues_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCTLINE_QUEUES", "gpu, default,gpu")
    assert load_settings().queue_names == ["default", "gpu"]
    monkeypatch.setenv("DUCTLINE_QUEUES", "gpu,bad name")
    with pytest.raises(ConfigurationError, match="DUCTLINE_QUEUES"):
        load_settings()
    monkeypatch.setenv("DUCTLINE_QUEUES", " , ")
    with pytest.raises(ConfigurationError, match="at least one queue"):
        load_settings()


def test_execute_runs_every_queue() -> None:
    result = execute(queue_app.rendering, 1)
    assert result.overall_status == "success"
    assert result.output == {"value": 20, "role": ""}


# -- the store: claims by queue -------------------------------------------------------------


def test_a_claim_takes_only_the_queues_it_serves(store: Any) -> None:
    handle = queue_app.rendering.trigger(1, database=store)
    assert drive(store, queue_app.rendering) == ["prepare"]
    # "render" waits in "gpu": a default worker neither claims it nor wakes for it.
    assert store.claim("w", ["q_render"], 5, 60_000) == []
    assert store.next_wakeups(["q_render"])[0] is None
    assert store.next_wakeups(["q_render"], ["gpu"])[0] is not None
    assert drive(store, queue_app.rendering, queues=("gpu",)) == ["render"]
    assert drive(store, queue_app.rendering) == ["report"]
    assert store.get_run(handle.id)["status"] == "completed"


def test_priorities_order_claims_across_the_served_queues(store: Any) -> None:
    low = queue_app.rendering.trigger(1, database=store, priority=-5)
    high = queue_app.licensed.trigger(1, database=store, priority=5)
    claimed = store.claim("w", ["q_render", "q_licensed"], 1, 60_000, queues=["default", "licence"])
    assert [c.run_id for c in claimed] == [high.id]
    assert [c.run_id for c in store.claim("w", ["q_render", "q_licensed"], 1, 60_000,
                                          queues=["default", "licence"])] == [low.id]


def test_a_concurrency_limit_holds_within_a_queue(store: Any) -> None:
    from ductline.model.limits import step_limits

    for i in range(3):
        queue_app.limited.trigger(i, database=store)
    limits = step_limits({"q_limited": queue_app.limited.definition()})
    assert store.claim("w", ["q_limited"], 5, 60_000, limits=limits) == []  # not a default-queue worker
    assert len(store.claim("w", ["q_limited"], 5, 60_000, limits=limits, queues=["gpu"])) == 1
    assert store.claim("w2", ["q_limited"], 5, 60_000, limits=limits, queues=["gpu"]) == []


def test_the_queue_gauges_count_ready_jobs_and_live_workers(store: Any) -> None:
    from ductline.observability.metrics import QUEUE_READY, QUEUE_WORKERS, QueueServing, Registry

    queue_app.licensed.trigger(1, database=store)
    store.register_worker("w1", "h", 1, 1, queues=["default", "gpu"])
    gauges = Registry(queue_source=QueueServing(store, cache_seconds=0)).gauges()
    assert gauges[QUEUE_READY] == {("default",): 0.0, ("gpu",): 0.0, ("licence",): 1.0}
    assert gauges[QUEUE_WORKERS] == {("default",): 1.0, ("gpu",): 1.0, ("licence",): 0.0}


@pytest.mark.parametrize("backend", ["sqlite"])
def test_ductline_run_serves_every_queue_of_its_pipeline(db_url: str) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "ductline", "run", f"{APP}:rendering", "--args", "[1]",
                           "--concurrency", "1", "--database", db_url, "--json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["output"] == {"value": 20, "role": ""}
