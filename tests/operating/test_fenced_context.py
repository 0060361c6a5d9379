"""A step's context write is fenced by its attempt's lease, as its results are: once
a cancel took the lease (and a prune deleted the run), a late write from the
still-running step is refused, the step is told, and no row outlives its run."""

from __future__ import annotations

import threading
from typing import Any, cast

import prune_app
import pytest
from helpers import wait_for
from test_prune import past_the_last_finish, rows_of

from ductline.errors import LeaseLost
from ductline.execution import protocol
from ductline.operations.cancel import cancel_run
from ductline.operations.prune import prune
from ductline.runtime import requests
from ductline.runtime.slots import Runner
from ductline.store.records import ClaimedJob


class ToChild:
    """The worker's end of a child's pipe: what the parent answered it."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def send(self, message: tuple[Any, ...]) -> None:
        self.sent.append(message)


def claimed(store) -> ClaimedJob:
    handle = prune_app.fanned.trigger(3, database=store)
    [job] = store.claim("test-worker", ["prune_fanned"], 1, 60_000, queues=("default",))
    assert job.run_id == handle.id
    return job


def context_rows(store, run_id: str) -> int:
    with store.dialect.reader() as s:
        row = getattr(s, "_conn").execute(
            f"SELECT count(*) AS n FROM ductline_context WHERE run_id = '{run_id}'").fetchone()
    return int(row[0] if not isinstance(row, dict) else row["n"])


def test_a_context_write_after_cancel_and_prune_is_refused_and_the_step_told(store):
    job = claimed(store)
    child = ToChild()
    requests.answer(store, cast(Runner, child), job, "context_set", ("early", "1", False), 1)
    assert child.sent[-1] == protocol.reply(True, 1)  # while the lease is held: stored
    cancel_run(store, job.run_id)  # takes the lease; the step's child is still running
    past_the_last_finish(store)
    assert prune(store, 0).runs == 1 and set(rows_of(store, job.run_id).values()) == {0}

    requests.answer(store, cast(Runner, child), job, "context_set", ("late", "2", True), 2)
    kind, text, seq = child.sent[-1]
    assert (kind, seq) == (protocol.Kind.REPLY_ERROR.value, 2)
    assert "lease was lost" in text and "context value 'late' was not stored" in text
    assert context_rows(store, job.run_id) == 0  # no orphan row for the pruned run


def test_a_context_write_after_cancel_alone_writes_nothing_into_the_run(store):
    job = claimed(store)
    cancel_run(store, job.run_id)
    with pytest.raises(LeaseLost):
        store.context_set(job.run_id, "late", "2", overwrite=True, job_id=job.job_id, lease_token=job.lease_token)
    assert context_rows(store, job.run_id) == 0 and store.context_get(job.run_id, "late") is None


def test_a_context_write_racing_a_cancel_waits_for_it_and_is_refused(store, backend, db_url):
    """PostgreSQL: a cancel's update of the job (not yet committed) holds the row; the
    write waits for it, reads the lease again and is refused -- it never lands after
    the cancel as though the lease were still held."""
    if backend != "postgres":
        pytest.skip("SQLite serializes writes: a cancel is never half-done while a write reads")
    import psycopg

    job = claimed(store)
    outcome: list[BaseException | bool] = []
    with psycopg.connect(db_url.replace("postgresql+psycopg", "postgresql")) as cancelling:
        cancelling.execute("UPDATE ductline_jobs SET status = 'cancelled', lease_token = NULL WHERE id = %s",
                           (job.job_id,))

        def write() -> None:
            try:
                outcome.append(store.context_set(job.run_id, "late", "2", overwrite=True, job_id=job.job_id,
                                                 lease_token=job.lease_token))
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                outcome.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        with psycopg.connect(db_url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as watching:
            # The write waits on the job's row lock (or, unfenced, is done already).
            wait_for(lambda: bool(outcome) or watching.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
                "AND query LIKE '%AS held FROM ductline_jobs%'").fetchone()[0] > 0)
        cancelling.commit()
        writer.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], LeaseLost), outcome
    assert context_rows(store, job.run_id) == 0


def test_a_large_output_recorded_after_cancel_and_prune_writes_no_payload(store):
    """The chunks of an output above the inline limit are written in the transaction
    of the fenced write that keeps the job, and only once it kept it: a completion
    that arrives after its run was cancelled and pruned leaves no payload behind."""
    from ductline import codec
    from ductline.engine import record

    prune_app.large.trigger(1, database=store)
    [job] = store.claim("test-worker", ["prune_large"], 1, 60_000, queues=("default",))
    cancel_run(store, job.run_id)
    past_the_last_finish(store)
    assert prune(store, 0).runs == 1
    output = codec.dumps("x" * (3 * 1024 * 1024))
    with store.transaction() as tx:
        done = record.success(tx, prune_app.large.definition(), record.Attempt(
            job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token), output, 0)
    assert done.outcome == record.Outcome.LOST
    assert set(rows_of(store, job.run_id).values()) == {0}  # payloads and their chunks included


def test_a_log_batch_racing_a_prune_of_its_cancelled_run_leaves_no_rows(store, backend, db_url):
    """PostgreSQL: a step's last log lines, sent as its run was cancelled, meet a prune
    of the run under way (its jobs locked, its rows being deleted): the batch waits
    for the prune and finds its attempt gone, instead of landing beside a deleted run."""
    if backend != "postgres":
        pytest.skip("SQLite serializes writes: no prune is half-done while a batch is written")
    import psycopg

    from ductline.store import steplogs

    job = claimed(store)
    cancel_run(store, job.run_id)
    outcome: list[BaseException | None] = []
    with psycopg.connect(db_url.replace("postgresql+psycopg", "postgresql")) as pruning:
        # What a prune's transaction holds before it commits (prune_busy, then the deletes).
        pruning.execute("SELECT id FROM ductline_jobs WHERE run_id = %s FOR UPDATE", (job.run_id,))
        for table in ("ductline_step_logs", "ductline_attempts", "ductline_jobs"):
            pruning.execute(f"DELETE FROM {table} WHERE run_id = %s", (job.run_id,))
        pruning.execute("DELETE FROM ductline_runs WHERE id = %s", (job.run_id,))

        def append() -> None:
            try:
                steplogs.append(store.dialect, job.job_id, job.attempt, job.lease_token, 0,
                                [(1, "INFO", "stdout", "last words")])
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                outcome.append(exc)

        writer = threading.Thread(target=append)
        writer.start()
        with psycopg.connect(db_url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as watching:
            wait_for(lambda: bool(outcome) or watching.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
                "AND query LIKE '%INTO ductline_step_logs%'").fetchone()[0] > 0)
        pruning.commit()
        writer.join(30)
    assert outcome == [None]
    assert set(rows_of(store, job.run_id).values()) == {0}, rows_of(store, job.run_id)  # no row outlives its run
