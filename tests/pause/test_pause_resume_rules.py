"""Rules a resume obeys (both backends): an expired pause is never resumed (it fails
closed even before a worker's sweep has failed the run), a new input obeys the
payload limits like trigger arguments, and `ductline resume` prints only its result
(run by the command line's entry point in the test process)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from typing import Any

import pause_app
import psycopg
import pytest
from helpers import ductline_in_process
from pause_support import drive, jobs_by_step
from starlette.testclient import TestClient

from ductline import InvalidStateError, PayloadTooLarge, codec
from ductline.handle import RunHandle
from ductline.engine import stop as abort
from ductline.store import Store, payloads
from ductline.views import iso
from ductline.web import create_app

INLINE = 1024
MAX = 4096
TOKEN = "resume-rules-token"


def sql(db_url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """A read or write on a separate connection of the test's database."""
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url[len("sqlite:///"):], timeout=30)
        try:
            rows = list(conn.execute(query.replace("%s", "?"), params).fetchall())
            conn.commit()
            return rows
        finally:
            conn.close()
    with psycopg.connect(db_url, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return list(cur.fetchall()) if cur.description else []


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """A command run by the command line's entry point in this process."""
    return ductline_in_process(*args)


def paused(store: Store, pipeline=pause_app.long, arg: int = 5) -> RunHandle:
    handle = pipeline.trigger(arg, database=store)
    assert drive(store, pipeline) == ["prepare"]
    assert handle.status() == "paused"
    return handle


def snapshot(db_url: str, store: Store, run_id: str) -> tuple[Any, ...]:
    """The run's row, its jobs' rows and its payloads."""
    run = sql(db_url, "SELECT * FROM ductline_runs WHERE id = %s", (run_id,))
    jobs = sql(db_url, "SELECT * FROM ductline_jobs WHERE run_id = %s ORDER BY step", (run_id,))
    return run, jobs, payloads.run_payloads(store, run_id)


def job_input(db_url: str, run_id: str, step: str) -> str:
    (row,) = sql(db_url, "SELECT input FROM ductline_jobs WHERE run_id = %s AND step = %s", (run_id, step))
    return row[0]


@pytest.fixture
def small_limits(monkeypatch, tmp_path):
    """Payload limits of this process: 1 KiB inline, 4 KiB at most."""
    monkeypatch.chdir(tmp_path)  # no ductline.toml of the working directory
    monkeypatch.delenv("DUCTLINE_CONFIG", raising=False)
    monkeypatch.setenv("DUCTLINE_PAYLOAD_INLINE_BYTES", str(INLINE))
    monkeypatch.setenv("DUCTLINE_PAYLOAD_MAX_BYTES", str(MAX))


def sized(total: int) -> dict[str, str]:
    """An input whose resume encoding ``[{"blob": "x..."}]`` is exactly ``total`` bytes."""
    value = {"blob": ""}
    value["blob"] = "x" * (total - len(codec.dumps([value])))
    assert len(codec.dumps([value])) == total
    return value


# -- an expired pause fails closed ------------------------------------------------------
def expire_in_sql(db_url: str, store: Store, run_id: str) -> int:
    """Move the paused job's expiry one second into the past (database clock)."""
    expires = store.now_ms() - 1000
    sql(db_url, "UPDATE ductline_jobs SET pause_expires_ms = %s WHERE run_id = %s AND status = 'paused'",
        (expires, run_id))
    return expires


def test_an_expired_pause_is_not_resumed_and_nothing_changes(store, db_url):
    handle = paused(store)
    expires = expire_in_sql(db_url, store, handle.id)
    before = snapshot(db_url, store, handle.id)
    message = (f"run {handle.id} cannot be resumed: its pause before step 'approve' expired at "
               f"{iso(expires)}; the run fails closed")
    for attempt in ({}, {"input": {"approved_by": "late"}}):
        with pytest.raises(InvalidStateError) as refused:
            handle.resume(**attempt)
        assert str(refused.value) == message
    assert snapshot(db_url, store, handle.id) == before
    assert handle.status() == "paused"
    assert drive(store, pause_app.long) == []  # approve never runs
    # The sweep still fails the run closed, as it would have anyway.
    assert abort.expire_due(store, {}) == 1
    run = store.get_run(handle.id)
    assert (run["status"], run["halt_reason"]) == ("failed", "pause_expired")
    assert jobs_by_step(store, handle.id)["approve"]["status"] == "failed"


def test_resume_jobs_itself_is_fenced_on_the_expiry(store, db_url):
    handle = paused(store)
    expire_in_sql(db_url, store, handle.id)
    approve = jobs_by_step(store, handle.id)["approve"]
    with store.transaction() as tx:
        assert tx.resume_jobs([approve["id"]], None) == 0
    assert jobs_by_step(store, handle.id)["approve"]["status"] == "paused"


def test_a_pause_that_has_not_expired_yet_is_resumed(store):
    handle = paused(store)
    assert jobs_by_step(store, handle.id)["approve"]["pause_expires_ms"] > store.now_ms()
    assert handle.resume() == ["approve"]
    assert drive(store, pause_app.long) == ["approve"]
    assert handle.output() == {"approved": {"order": 5}}


def test_a_worker_that_knows_the_pipeline_records_its_pause_timeout_and_skips_what_follows(store, db_url):
    handle = paused(store, pause_app.expiring)
    # The row's own times would say 0 s (it expired before it was made): the
    # definition's 1 s must be what the failure names.
    sql(db_url, "UPDATE ductline_jobs SET pause_expires_ms = created_ms - 60000 "
                "WHERE run_id = %s AND status = 'paused'", (handle.id,))
    assert abort.expire_due(store, {"pause_expiring": pause_app.expiring.definition()}) == 1
    run = store.get_run(handle.id)
    assert (run["status"], run["halt_reason"]) == ("failed", "pause_expired")
    metadata = json.loads(run["metadata"])
    assert metadata["pause_timeout_seconds"] == 1
    assert metadata["error"] == "pause before step 'approve' expired after 1 s without a resume"
    jobs = jobs_by_step(store, handle.id)
    assert (jobs["approve"]["status"], jobs["finish"]["status"]) == ("failed", "skipped")
    assert jobs["finish"]["skip_reason"] == "pause expired" and jobs["finish"]["skip_root"] == "approve"


def test_a_run_cancelled_after_its_expired_pause_was_read_is_left_cancelled(store, db_url):
    handle = paused(store)
    expire_in_sql(db_url, store, handle.id)
    [row] = store.expired_pauses()
    handle.cancel()  # between the sweep's read and its transaction
    with store.transaction() as tx:
        assert abort.expire_pause(tx, pause_app.long.definition(), row) is None
    run = store.get_run(handle.id)
    assert (run["status"], run["halt_reason"]) == ("cancelled", None)
    assert jobs_by_step(store, handle.id)["approve"]["status"] == "skipped"
    assert abort.expire_due(store, {}) == 0


def test_the_cli_and_the_api_refuse_an_expired_pause(store, db_url, monkeypatch):
    handle = paused(store)
    expires = expire_in_sql(db_url, store, handle.id)
    message = (f"run {handle.id} cannot be resumed: its pause before step 'approve' expired at "
               f"{iso(expires)}; the run fails closed")
    done = cli("resume", handle.id, "--database", db_url)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.strip() == f"error: InvalidStateError: {message}"
    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    with TestClient(create_app(store, token=TOKEN, poll_seconds=0.05), base_url="http://localhost") as client:
        answer = client.post(f"/api/runs/{handle.id}/resume", headers={"Authorization": f"Bearer {TOKEN}"})
    assert (answer.status_code, answer.json()) == (409, {"error": message, "status": 409})
    assert handle.status() == "paused"


# -- a resume input obeys the payload limits --------------------------------------------
def test_a_resume_input_above_the_hard_limit_is_refused_before_anything_is_written(store, db_url,
                                                                                     small_limits):
    handle = paused(store, pause_app.chain)
    before = snapshot(db_url, store, handle.id)
    with pytest.raises(PayloadTooLarge) as refused:
        handle.resume(input=sized(MAX + 1))
    assert str(refused.value) == f"resume input: {MAX + 1} bytes of JSON exceed the limit of {MAX} bytes " \
                                 "(payload_max_bytes)"
    assert snapshot(db_url, store, handle.id) == before
    assert handle.resume(input=sized(MAX)) == ["approve"]  # exactly the limit is allowed


def test_a_resume_input_above_the_inline_limit_is_stored_out_of_line(store, db_url, small_limits):
    handle = paused(store, pause_app.chain)
    value = sized(INLINE + 1)
    assert handle.resume(input=value) == ["approve"]
    stored = job_input(db_url, handle.id, "approve")
    ref = payloads.parse_reference(stored)
    assert ref is not None and ref.size == INLINE + 1
    assert [(p["id"], p["size"], p["chunks"]) for p in payloads.run_payloads(store, handle.id)] == [
        (ref.id, INLINE + 1, 1)]
    assert payloads.load(store, handle.id, stored) == codec.dumps([value])


def test_a_resume_input_of_exactly_the_inline_limit_stays_inline(store, db_url, small_limits):
    handle = paused(store, pause_app.chain)
    value = sized(INLINE)
    handle.resume(input=value)
    assert job_input(db_url, handle.id, "approve") == codec.dumps([value])
    assert payloads.run_payloads(store, handle.id) == []
    drive(store, pause_app.chain)
    assert handle.output() == {"approved": value}


def test_the_api_and_the_cli_refuse_a_resume_input_above_the_hard_limit(store, db_url, small_limits):
    handle = paused(store, pause_app.chain)
    value = sized(MAX + 1)
    message = f"resume input: {MAX + 1} bytes of JSON exceed the limit of {MAX} bytes (payload_max_bytes)"
    with TestClient(create_app(store, token=TOKEN, poll_seconds=0.05), base_url="http://localhost") as client:
        answer = client.post(f"/api/runs/{handle.id}/resume", headers={"Authorization": f"Bearer {TOKEN}"},
                             json={"input": value})
    assert (answer.status_code, answer.json()) == (422, {"error": message, "status": 422})
    done = cli("resume", handle.id, "--input", json.dumps(value), "--database", db_url)
    assert (done.returncode, done.stdout, done.stderr.strip()) == (2, "", f"error: PayloadTooLarge: {message}")
    assert jobs_by_step(store, handle.id)["approve"]["status"] == "paused"
    assert payloads.run_payloads(store, handle.id) == []


# -- the CLI prints its result only -----------------------------------------------------
def test_cli_resume_prints_its_result_and_no_log_line(store, db_url):
    handle = paused(store, pause_app.chain)
    done = cli("resume", handle.id, "--input", '{"ok": 1}', "--database", db_url)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, f"run {handle.id} resumed: approve with a new input\n", "")
    assert handle.status() == "running"
