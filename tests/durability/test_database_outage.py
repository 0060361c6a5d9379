"""A PostgreSQL that goes away and comes back (a private cluster, started by the
test, so the shared one is never touched): nothing recorded is lost or duplicated,
and the worker recovers by itself. Also: a worker started before its database."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import rt_app
from helpers import APP, FAST_ENV, start_worker, stop_worker

from ductline.store import open_store
from ductline.views import run_view

BIN = Path("/usr/lib/postgresql") / sorted(os.listdir("/usr/lib/postgresql"))[-1] / "bin"


def as_postgres(*argv: str) -> None:
    cmd = list(argv)
    if os.geteuid() == 0:  # initdb refuses to run as root
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    subprocess.run(cmd, check=True, capture_output=True)


class Cluster:
    def __init__(self, root: Path) -> None:
        self.data = root / "data"
        self.sockets = root
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        shutil.chown(root, "postgres") if os.geteuid() == 0 else None
        as_postgres(str(BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        as_postgres(str(BIN / "pg_ctl"), "-D", str(self.data), "-w", "-l", str(self.sockets / "log"),
                    "-o", f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1", "start")

    def stop(self) -> None:
        as_postgres(str(BIN / "pg_ctl"), "-D", str(self.data), "-w", "-m", "fast", "stop")


@pytest.fixture
def cluster():
    # Not under pytest's tmp_path: that is private to root, and PostgreSQL runs as postgres.
    root = Path(tempfile.mkdtemp(prefix="ductline-pg-"))
    os.chmod(root, 0o755)
    c = Cluster(root)
    c.start()
    yield c
    try:
        c.stop()
    except subprocess.CalledProcessError:
        pass
    shutil.rmtree(root, ignore_errors=True)


def test_database_restarted_mid_run_loses_and_duplicates_nothing(cluster):
    store = open_store(cluster.url)
    store.migrate()
    worker = start_worker(cluster.url, env={"DUCTLINE_LEASE_SECONDS": "3"})
    try:
        handles = [rt_app.slow_chain.trigger(i, database=store) for i in range(6)]
        deadline = time.monotonic() + 20
        while not any(s["status"] == "completed" for h in handles for s in run_view(store, h.id)["steps"]):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        cluster.stop()
        time.sleep(3)
        assert worker.poll() is None, "the worker died with its database"
        cluster.start()
        for handle in handles:
            assert handle.wait(90) == "completed"
            assert handle.output() == 2 * run_view(store, handle.id)["args"][0]
        for handle in handles:
            for step in run_view(store, handle.id)["steps"]:
                results = [a["result"] for a in step["attempts"]]
                assert results.count("succeeded") == 1, (step["step"], results)
    finally:
        stop_worker(worker)
        store.close()


def test_a_worker_started_before_its_database_waits_for_it(cluster):
    store = open_store(cluster.url)
    store.migrate()
    handle = rt_app.chain.trigger(2, database=store)
    store.close()
    cluster.stop()
    worker = start_worker(cluster.url)
    try:
        time.sleep(2)
        assert worker.poll() is None, "the worker gave up instead of waiting"
        cluster.start()
        store = open_store(cluster.url)
        assert handle.__class__(handle.id, store).wait(60) == "completed"
        store.close()
    finally:
        stop_worker(worker)


def pg_url(database: str) -> str:
    base = os.environ.get("DUCTLINE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test").rpartition("/")[0]
    return f"{base}/{database}"


def _refused_port() -> int:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(database: str, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "ductline", *options, "worker", "--app", APP, "--database",
                             database, "--concurrency", "1"],
                            env={**os.environ, **FAST_ENV}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _lines_until(worker: subprocess.Popen[str], wanted: str) -> list[str]:
    assert worker.stdout is not None
    seen = [worker.stdout.readline()]
    while wanted not in seen[-1]:
        assert seen[-1], f"the worker ended before {wanted!r}: {seen}"
        seen.append(worker.stdout.readline())
    return seen


def test_a_worker_waiting_for_its_database_stops_cleanly_on_sigterm():
    """SIGTERM while the worker waits for a database it cannot reach ends it with exit
    0 (a graceful stop: nothing was claimed), not by the signal's default action."""
    worker = _worker(f"postgresql://postgres@127.0.0.1:{_refused_port()}/test")
    try:
        seen = "".join(_lines_until(worker, "; retrying in 0.5 s"))
        assert " WARNING ductline.worker: Database unavailable (" in seen and "Connection refused" in seen
        worker.send_signal(signal.SIGTERM)
        rest = worker.communicate(timeout=30)[0]
        assert worker.returncode == 0, rest
        assert "INFO ductline.worker: Stopped while waiting for the database: nothing was claimed" in rest
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_the_wait_for_a_database_logs_json_lines_with_log_format_json():
    worker = _worker(f"postgresql://postgres@127.0.0.1:{_refused_port()}/test", "--log-format", "json")
    try:
        seen = _lines_until(worker, "retrying in 1.0 s")
        waits = [json.loads(line) for line in seen if "Database unavailable" in line]
        assert [w["message"].rpartition("; ")[2] for w in waits] == ["retrying in 0.5 s", "retrying in 1.0 s"]
        for line in waits:
            assert line["level"] == "WARNING" and line["logger"] == "ductline.worker" and line["time"]
            assert "Connection refused" in line["message"]
        worker.send_signal(signal.SIGTERM)
        rest = worker.communicate(timeout=30)[0]
        assert worker.returncode == 0, rest
        last = json.loads(rest.strip().splitlines()[-1])
        assert (last["level"], last["message"]) == ("INFO", "Stopped while waiting for the database: "
                                                             "nothing was claimed")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


@pytest.mark.parametrize("database, reason", [
    (pg_url("ductline_no_such_db"), 'database "ductline_no_such_db" does not exist'),
    (pg_url("test").replace("postgres@", "ductline_no_such_role@"), 'role "ductline_no_such_role" does not exist'),
    ("sqlite:////nonexistent-ductline-dir/ductline.db", "directory '/nonexistent-ductline-dir' does not exist"),
])
def test_a_worker_refused_for_good_at_start_up_exits_2_at_once(database, reason):
    """A database or role that does not exist is no outage: the worker says so and
    exits 2, as every other command does on that URL, instead of waiting forever."""
    worker = _worker(database)
    try:
        output = worker.communicate(timeout=60)[0]
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 2, output
    assert output.startswith("error: StoreUnavailable: "), output
    assert reason in output and "retrying" not in output, output
    runs = subprocess.run([sys.executable, "-m", "ductline", "runs", "--database", database],
                          capture_output=True, text=True, timeout=60)
    assert runs.returncode == 2
    assert output.splitlines()[0] == runs.stderr.splitlines()[0]


def test_a_supervisor_refused_for_good_exits_2_without_starting_workers():
    database = pg_url("ductline_no_such_db")
    supervisor = subprocess.run([sys.executable, "-m", "ductline", "worker", "--app", APP, "--database", database,
                                 "--processes", "2"], env={**os.environ, **FAST_ENV}, capture_output=True,
                                text=True, timeout=60)
    assert supervisor.returncode == 2, supervisor.stderr
    assert supervisor.stderr.startswith("error: StoreUnavailable: "), supervisor.stderr
    assert "restarting" not in supervisor.stderr
