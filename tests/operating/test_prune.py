"""Retention: `ductline prune` and the prune operation delete ended runs whole, in
transactions of at most 1,000 rows; active, paused and halted runs stay unless named, and a run with a claimed job stays always;
bad input deletes nothing; a prune killed in the middle of a transaction leaves no run
half-deleted. Both backends. The commands run by the command line's entry point in
the test process (`helpers.ductline_in_process`), but the one killed inside its
transaction, a real process."""

from __future__ import annotations

import os
import subprocess
import sys

import prune_app
import pytest
from helpers import drive, ductline_in_process, wait_for

from ductline.operations.prune import prune
from ductline.operations.cancel import cancel_run
from ductline.store import steplogs

TABLES = ("ductline_jobs", "ductline_attempts", "ductline_payloads", "ductline_context", "ductline_fanins",
          "ductline_step_logs")


def rows_of(store, run_id):
    """Rows each table holds for one run (chunks through their payloads)."""
    counts = {}
    with store.dialect.reader() as s:
        for table in TABLES:
            counts[table] = _count(s, f"SELECT count(*) AS n FROM {table} WHERE run_id = '{run_id}'")
        counts["ductline_payload_chunks"] = _count(
            s, "SELECT count(*) AS n FROM ductline_payload_chunks WHERE payload_id IN "
               f"(SELECT id FROM ductline_payloads WHERE run_id = '{run_id}')")
        counts["ductline_runs"] = _count(s, f"SELECT count(*) AS n FROM ductline_runs WHERE id = '{run_id}'")
    return counts


def _count(session, sql):
    conn = getattr(session, "_conn")
    row = conn.execute(sql).fetchone()
    return int(row[0] if not isinstance(row, dict) else row["n"])


def log_step_attempts(store, run_id):
    """Step log rows for every attempt of a run, as a worker stores them."""
    with store.dialect.reader() as s:
        conn = getattr(s, "_conn")
        attempts = conn.execute(f"SELECT job_id, attempt, lease_token FROM ductline_attempts "
                                f"WHERE run_id = '{run_id}'").fetchall()
    for row in attempts:
        job_id, attempt, token = (row["job_id"], row["attempt"], row["lease_token"]) if isinstance(row, dict) \
            else tuple(row)
        steplogs.append(store.dialect, job_id, attempt, token, 0, [(1, "INFO", "stdout", "hello")] * 2)
    assert rows_of(store, run_id)["ductline_step_logs"] == 2 * len(attempts) > 0


def past_the_last_finish(store):
    """Wait until the database clock is past the last run's finish: "ended more than
    0 s ago" excludes a run that ended in the very millisecond the prune reads the clock."""
    with store.dialect.reader() as s:
        last = _count(s, "SELECT coalesce(max(finished_ms), 0) AS n FROM ductline_runs")
    wait_for(lambda: store.now_ms() > last)


def ended_runs(store):
    """A completed fan-out run (jobs, attempts, fan-in, context), a completed run with
    an out-of-line output (payload chunks), and a cancelled run."""
    fanned = prune_app.fanned.trigger(12, database=store)
    large = prune_app.large.trigger(3 * 1024 * 1024, database=store)
    drive(store, prune_app.fanned)
    drive(store, prune_app.large)
    with store.dialect.transaction() as s:  # what a step's ductline.context().set stored while it ran
        getattr(s, "_conn").execute(f"INSERT INTO ductline_context (run_id, key, value) VALUES ('{fanned.id}', 'seen', '12')")
    log_step_attempts(store, fanned.id)
    cancelled = prune_app.fanned.trigger(2, database=store)
    cancel_run(store, cancelled.id)
    assert (fanned.status(), large.status(), cancelled.status()) == ("completed", "completed", "cancelled")
    assert rows_of(store, large.id)["ductline_payload_chunks"] > 1
    past_the_last_finish(store)
    return [fanned, large, cancelled]


def test_ended_runs_are_deleted_whole_and_unfinished_ones_kept(store):
    ended = ended_runs(store)
    waiting = prune_app.fanned.trigger(3, database=store, delay=3600)  # pending: kept
    dry = prune(store, 0, dry_run=True)
    assert dry.runs == 3 and all(rows_of(store, h.id)["ductline_runs"] == 1 for h in ended)
    report = prune(store, 0)
    assert report.runs == 3
    for handle in ended:
        assert set(rows_of(store, handle.id).values()) == {0}, handle.id
    assert rows_of(store, waiting.id)["ductline_runs"] == 1
    assert prune(store, 0).runs == 0
    assert prune(store, 0, statuses=["pending"]).runs == 1  # named explicitly


def test_only_runs_older_than_the_cutoff_go(store):
    old, recent = (prune_app.large.trigger(10, database=store) for _ in range(2))
    drive(store, prune_app.large)
    with store.transaction() as tx:  # make one of them end two days ago
        tx.s.fetch("now")
        getattr(tx.s, "_conn").execute(
            f"UPDATE ductline_runs SET finished_ms = finished_ms - 172800000 WHERE id = '{old.id}'")
    assert prune(store, 86400).runs == 1
    assert rows_of(store, old.id)["ductline_runs"] == 0 and rows_of(store, recent.id)["ductline_runs"] == 1


def test_transactions_hold_at_most_a_thousand_rows_but_a_bigger_run_goes_whole(store):
    small = [prune_app.fanned.trigger(30, database=store) for _ in range(40)]  # ~62 rows each
    huge = prune_app.fanned.trigger(1200, database=store)  # ~2,400 rows: alone
    drive(store, prune_app.fanned)
    past_the_last_finish(store)
    report = prune(store, 0)
    assert report.runs == 41
    # 40 runs of about 62 rows fit 16 to a transaction: at least 3, plus the big one.
    assert report.transactions >= 4
    assert set(rows_of(store, huge.id).values()) == {0}
    assert all(rows_of(store, h.id)["ductline_runs"] == 0 for h in small)


def cli(*args):
    return ductline_in_process(*args)


def cli_process(*args, env=None):
    """The command in a process of its own (one a fault checkpoint can kill)."""
    return subprocess.run([sys.executable, "-m", "ductline", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args, message", [
    (["--older-than", "-1d"], "--older-than: expected whole seconds"),
    (["--older-than", "soon"], "--older-than: expected whole seconds"),
    (["--older-than", "1d", "--status", "finished"], "unknown run status finished"),
], ids=["negative", "malformed", "unknown-status"])
def test_bad_input_deletes_nothing(store, db_url, args, message):
    ended = ended_runs(store)
    done = cli("prune", *args, "--database", db_url)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert all(rows_of(store, h.id)["ductline_runs"] == 1 for h in ended)


def test_the_cli_prints_what_it_deleted(store, db_url):
    ended_runs(store)
    dry = cli("prune", "--older-than", "0s", "--dry-run", "--database", db_url)
    assert dry.returncode == 0 and "would delete 3 run(s)" in dry.stdout, dry.stderr
    # the age with its unit: a bare number is seconds
    dry = cli("prune", "--older-than", "1", "--dry-run", "--database", db_url)
    assert dry.returncode == 0 and "that ended more than 1 s ago" in dry.stdout, dry.stdout
    dry = cli("prune", "--older-than", "90m", "--dry-run", "--database", db_url)
    assert dry.returncode == 0 and "that ended more than 90 min ago" in dry.stdout, dry.stdout
    done = cli("prune", "--older-than", "0s", "--database", db_url)
    assert done.returncode == 0 and "deleted 3 run(s)" in done.stdout, done.stderr


def test_a_prune_killed_mid_transaction_leaves_no_run_half_deleted(store, db_url):
    ended = ended_runs(store)
    before = {h.id: rows_of(store, h.id) for h in ended}
    done = cli_process("prune", "--older-than", "0s", "--database", db_url, env={"DUCTLINE_FAULT": "during_prune"})
    assert done.returncode == -9  # SIGKILL after it deleted attempts, before it committed
    for handle in ended:
        assert rows_of(store, handle.id) == before[handle.id]  # all of it, or (below) none of it
    assert cli("prune", "--older-than", "0s", "--database", db_url).returncode == 0
    for handle in ended:
        assert set(rows_of(store, handle.id).values()) == {0}


def claimed_run(store):
    """A running run whose first step a worker has claimed (its attempt running)."""
    handle = prune_app.fanned.trigger(3, database=store)
    [job] = store.claim("test-worker", ["prune_fanned"], 1, 60_000, queues=("default",))
    assert job.run_id == handle.id and handle.status() == "running"
    return handle


def idle_running_run(store):
    """A running run with nothing claimed: its first step done, the next one delayed."""
    handle = prune_app.paced.trigger(4, database=store)
    drive(store, prune_app.paced)
    assert handle.status() == "running"
    return handle


def test_named_running_runs_go_unless_a_worker_runs_one_of_their_steps(store):
    busy, idle = claimed_run(store), idle_running_run(store)
    dry = prune(store, 0, statuses=["running"], dry_run=True)
    assert (dry.runs, dry.busy) == (1, 1)
    report = prune(store, 0, statuses=["running"])
    assert (report.runs, report.busy) == (1, 1)
    assert set(rows_of(store, idle.id).values()) == {0}
    kept = rows_of(store, busy.id)
    assert kept["ductline_runs"] == 1 and kept["ductline_jobs"] == 1 and kept["ductline_attempts"] == 1
    assert prune(store, 0).runs == 0  # never by default either


def test_a_busy_run_cancelled_goes_by_default(store):
    """What the message says to do: cancel records the claimed attempt ended at once,
    and the run is then an ended run like any other."""
    busy = claimed_run(store)
    assert prune(store, 0, statuses=["running"]).busy == 1
    cancel_run(store, busy.id)
    assert busy.status() == "cancelled"
    past_the_last_finish(store)
    report = prune(store, 0)
    assert (report.runs, report.busy) == (1, 0)
    assert set(rows_of(store, busy.id).values()) == {0}


def test_a_run_whose_job_another_transaction_holds_is_left_whole(store, backend, db_url):
    """PostgreSQL: a job locked by a transaction not yet committed (a claim under
    way) makes its run busy; the prune neither waits for it nor deletes under it."""
    if backend != "postgres":
        pytest.skip("SQLite serializes writes: no claim is half-done while a prune runs")
    import psycopg

    idle = idle_running_run(store)
    with psycopg.connect(db_url.replace("postgresql+psycopg", "postgresql")) as other:
        other.execute(f"SELECT id FROM ductline_jobs WHERE run_id = '{idle.id}' AND status = 'pending' FOR UPDATE")
        report = prune(store, 0, statuses=["running"])
        assert (report.runs, report.busy) == (0, 1)
        other.rollback()
    assert rows_of(store, idle.id)["ductline_jobs"] == 2
    assert prune(store, 0, statuses=["running"]).runs == 1


def test_the_cli_says_which_runs_it_left(store, db_url):
    claimed_run(store)
    idle_running_run(store)
    dry = cli("prune", "--older-than", "0s", "--status", "running", "--dry-run", "--database", db_url)
    assert dry.returncode == 0 and "would delete 1 run(s)" in dry.stdout, dry.stderr
    assert "would leave 1 run(s) whole: a worker is running a step of each" in dry.stdout
    done = cli("prune", "--older-than", "0s", "--status", "running", "--database", db_url)
    assert done.returncode == 0 and "deleted 1 run(s)" in done.stdout, done.stderr
    assert "left 1 run(s) whole: a worker is running a step of each (cancel them first" in done.stdout


# -- worker rows ----------------------------------------------------------------------

HOUR_MS = 3600 * 1000


def worker_row(store, worker_id, *, stopped, age_ms):
    """A worker row whose last heartbeat is ``age_ms`` old (database clock)."""
    store.register_worker(worker_id, "host-a", 4242, 2)
    if stopped:
        store.worker_stopped(worker_id)
    with store.transaction() as tx:
        tx.s.fetch("now")
        getattr(tx.s, "_conn").execute(
            f"UPDATE ductline_workers SET heartbeat_ms = heartbeat_ms - {age_ms} WHERE id = '{worker_id}'")


def worker_ids(store):
    return {w["id"] for w in store.list_workers(limit=1000)}


def test_rows_of_workers_gone_longer_than_the_retention_are_deleted(store):
    worker_row(store, "stopped-2d", stopped=True, age_ms=48 * HOUR_MS)
    worker_row(store, "stopped-30m", stopped=True, age_ms=HOUR_MS // 2)
    worker_row(store, "lost-2d", stopped=False, age_ms=48 * HOUR_MS)
    worker_row(store, "lost-2h", stopped=False, age_ms=2 * HOUR_MS)
    worker_row(store, "live", stopped=False, age_ms=0)
    assert prune(store, 3600, dry_run=True).workers == 2
    report = prune(store, 3600)
    assert report.workers == 2 and report.runs == 0
    assert worker_ids(store) == {"stopped-30m", "lost-2h", "live"}
    # Retention 0: every stopped row goes; a lost one stays a day (it may heartbeat
    # again once it reaches the database), a live one always.
    assert prune(store, 0).workers == 1
    assert worker_ids(store) == {"lost-2h", "live"}


def test_worker_rows_go_in_bounded_transactions(store):
    for i in range(5):
        worker_row(store, f"gone-{i}", stopped=True, age_ms=HOUR_MS)
    report = prune(store, 60, max_rows=2)
    assert report.workers == 5 and report.transactions == 3
    assert worker_ids(store) == set()


def test_the_cli_prunes_worker_rows(store, db_url):
    worker_row(store, "stopped-2d", stopped=True, age_ms=48 * HOUR_MS)
    worker_row(store, "live", stopped=False, age_ms=0)
    dry = cli("prune", "--older-than", "1d", "--dry-run", "--database", db_url)
    assert dry.returncode == 0 and "1 row(s) of workers gone that long" in dry.stdout, dry.stderr
    done = cli("prune", "--older-than", "1d", "--database", db_url)
    assert done.returncode == 0 and "deleted 1 row(s) of workers gone more than 1 d ago" in done.stdout, done.stderr
    assert worker_ids(store) == {"live"}
