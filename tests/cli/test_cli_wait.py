"""``ductline wait RUN_ID`` watches a run another command started until it settles,
with a real worker, and exits as ``ductline run`` does: 0 completed, 1 otherwise;
124 when --timeout passes first (the run goes on)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import rt_app
from helpers import FAST_ENV, wait_for
from tcp_proxy_support import TcpProxy


def _wait(db_url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ductline", "wait", *args, "--database", db_url],
                            env={**os.environ, **FAST_ENV, "COLUMNS": "200"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_wait_follows_a_run_to_its_completion_by_a_prefix(store, db_url, workers) -> None:
    handle = rt_app.chain.trigger(3, database=store)
    waiting = _wait(db_url, handle.id[:8], "--json")  # started before any worker: it must wait
    workers(concurrency=1)
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    line = json.loads(out.strip().splitlines()[-1])
    assert line["run_id"] == handle.id and line["status"] == "completed"
    assert line["output"] == handle.result(timeout=5)
    assert f"run {handle.id}: completed" in err


def test_wait_exits_1_for_a_halted_run_and_names_the_step(store, db_url, workers, tmp_path) -> None:
    handle = rt_app.failing.trigger(1, database=store)
    waiting = _wait(db_url, handle.id)
    workers(concurrency=1, env={"RT_HALT_FILE": str(tmp_path / "halted")})
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 1, err
    assert f"run {handle.id}: halted" in err
    assert "always_fails" in err and "ductline retry" in err


def test_wait_timeout_exits_124_and_leaves_the_run(store, db_url) -> None:
    handle = rt_app.busy.trigger(600, database=store)  # no worker: it stays pending
    waiting = _wait(db_url, handle.id, "--timeout", "1")
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 124, err
    assert f"run {handle.id} is still pending after 1" in err
    assert handle.status() == "pending"


def _watching(db_url: str, proxy: TcpProxy) -> bool:
    """Whether a process connected through ``proxy`` reads the run's progress (its
    backend's last query counts the run's jobs): it has found the run and waits."""
    ports = list(proxy.server_ports)
    if not ports:
        return False
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY(%s) "
                           "AND query LIKE '%%FROM ductline_jobs WHERE run_id%%'", (ports,)).fetchone()
    return row is not None and row[0] > 0


def test_wait_keeps_its_timeout_and_stops_on_sigterm_while_the_database_does_not_answer(backend, store, db_url) -> None:
    """A database that stops answering (a partition: connections stay open, no reply
    comes) neither stretches --timeout nor keeps SIGTERM from stopping the wait."""
    if backend != "postgres":
        pytest.skip("a silent network is a PostgreSQL connection's trouble")
    handle = rt_app.busy.trigger(600, database=store)
    proxies, waits = [], []
    try:
        # The timed wait starts last, so that the database goes silent as soon as it
        # watches: its 5 s run out while no answer comes.
        for args in ((), ("--timeout", "5")):
            proxy, url = TcpProxy.for_url(db_url)
            proxies.append(proxy)
            waits.append(_wait(url, handle.id, *args))
            wait_for(lambda: _watching(db_url, proxy), timeout=60)
        signalled, timed = waits
        for proxy in proxies:
            proxy.hold()
        signalled.send_signal(signal.SIGTERM)
        out, err = signalled.communicate(timeout=30)
        assert signalled.returncode == 130, err
        assert f"stopped waiting; run {handle.id} is still pending (the run goes on)" in err
        out, err = timed.communicate(timeout=30)
        assert timed.returncode == 124, err
        assert f"run {handle.id} is still pending after 5 (the run goes on)" in err
    finally:
        for proc in waits:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        for proxy in proxies:
            proxy.stop()
    assert handle.status() == "pending"


def test_wait_ends_with_an_error_when_its_sqlite_file_is_deleted(backend, store, db_url) -> None:
    """A deleted database file is not an outage to wait out: the wait would report a
    run it can no longer see as still pending until its timeout."""
    if backend != "sqlite":
        pytest.skip("a database file is SQLite's")
    handle = rt_app.busy.trigger(600, database=store)
    waiting = _wait(db_url, handle.id, "--timeout", "600")
    path = Path(db_url.removeprefix("sqlite:///"))
    # It has found the run and follows it before the file goes: its progress display
    # runs (a thread of its own and rich's), which starts once the run is found.
    wait_for(lambda: len(_tasks(waiting.pid)) >= 3, timeout=60)
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        name.unlink(missing_ok=True)
    try:
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert waiting.returncode == 2, err
    assert "DatabaseReplaced" in err and "deleted" in err


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def test_wait_draws_a_cancelled_runs_bar_where_the_run_stood(store, db_url) -> None:
    """One of two steps done when the run was cancelled: the bar shows 1/2 and the
    run's status, not a full bar (the skipped step is not done)."""
    import prune_app
    from helpers import drive

    from ductline.operations.cancel import cancel_run

    handle = prune_app.paced.trigger(4, database=store)  # its second step waits an hour
    drive(store, prune_app.paced)
    cancel_run(store, handle.id)
    waiting = _wait(db_url, handle.id)
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 1, err
    [bar] = [line for line in err.splitlines() if line.startswith("steps ")]
    assert " 1/2 " in bar and "run cancelled" in bar, bar
    assert f"run {handle.id}: cancelled" in err


def test_wait_draws_a_run_stopped_at_its_deadline_where_the_run_stood(store, db_url, workers) -> None:
    """quick -> stuck -> after, a 2 s deadline: ``stuck`` is killed in flight (its step
    run ``failed``) and ``after`` skipped. Only ``quick`` got to its end: 1/3, not 2/3."""
    handle = rt_app.deadline_chain.trigger(1, database=store)
    workers(concurrency=1)
    waiting = _wait(db_url, handle.id)
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 1, err
    assert sorted((j["step"], j["status"]) for j in store.run_jobs(handle.id)) == \
        [("after", "skipped"), ("quick", "completed"), ("stuck", "failed")]
    [bar] = [line for line in err.splitlines() if line.startswith("steps ")]
    assert " 1/3 " in bar and "run failed" in bar, bar
    assert f"run {handle.id}: failed (the run exceeded its deadline of 2 s)" in err


def test_wait_draws_a_completed_runs_bar_full(store, db_url) -> None:
    import prune_app
    from helpers import drive

    handle = prune_app.fanned.trigger(2, database=store)
    drive(store, prune_app.fanned)
    waiting = _wait(db_url, handle.id)
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    [bar] = [line for line in err.splitlines() if line.startswith("steps ")]
    assert " 4/4 " in bar and "run completed" in bar, bar
