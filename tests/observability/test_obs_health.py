"""``ductline health`` and ``ductline workers`` on both backends."""

from __future__ import annotations

import json
import re
import os
import subprocess
import signal
import socket
import sys
import time
from datetime import datetime
from pathlib import Path
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner

from ductline.cli import cli
from ductline.observability import health as checks
from ductline.observability.command import health, workers
from helpers import ductline_in_process, wait_for


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command run by the command line's entry point in this process (what it prints
    and exits with; the tests that poll it call it many times)."""
    return ductline_in_process(*args, env=env)


def test_commands_are_registered():
    assert cli.commands["health"] is health
    assert cli.commands["workers"] is workers


def test_health_exits_0_only_when_every_live_worker_heartbeated(store, db_url):
    # No worker at all: a liveness probe must fail.
    out = run_cli("health", "--database", db_url)
    assert out.returncode == 1
    assert "no live worker process" in out.stderr

    store.register_worker("w-1", "host-a", 101, 4)
    store.register_worker("w-2", "host-b", 202, 2)
    out = run_cli("health", "--json", "--database", db_url, env={"DUCTLINE_LEASE_SECONDS": "30"})
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["healthy"] is True
    assert report["max_age_seconds"] == 30.0  # the lease
    assert sorted(w["id"] for w in report["workers"]) == ["w-1", "w-2"]


def test_health_json_reports_each_worker_and_stale_heartbeats(store, db_url):
    runner = CliRunner()
    store.register_worker("w-fresh", "host-a", 101, 4)
    store.register_worker("w-stale", "host-b", 202, 2)
    with store.dialect.transaction() as s:  # its last heartbeat was 20 s ago: within the lease
        getattr(s, "_conn").execute("UPDATE ductline_workers SET heartbeat_ms = heartbeat_ms - 20000 "
                                    "WHERE id = 'w-stale'")
    store.renew_leases("w-fresh", [], 30_000, busy=3, undead=1, status="running")
    result = runner.invoke(health, ["--json", "--max-age", "2", "--database", db_url],
                           env={"DUCTLINE_LEASE_SECONDS": "30"})
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["healthy"] is False
    assert report["max_age_seconds"] == 2
    assert (report["live"], report["unhealthy"]) == (2, 1)
    assert "host-b:202" in report["message"]
    rows = {w["id"]: w for w in report["workers"]}
    fresh, stale = rows["w-fresh"], rows["w-stale"]
    assert set(fresh) == {"id", "host", "pid", "concurrency", "busy", "undead", "status", "started",
                          "last_heartbeat", "age_seconds", "live", "healthy", "problem", "health", "queues"}
    assert (fresh["host"], fresh["pid"], fresh["concurrency"], fresh["busy"], fresh["undead"]) == \
        ("host-a", 101, 4, 3, 1)
    assert fresh["status"] == "running" and fresh["healthy"] is True and fresh["age_seconds"] < 2
    assert stale["healthy"] is False and stale["age_seconds"] >= 20 and stale["health"] == "late"
    assert (fresh["problem"], stale["problem"]) == (None, "heartbeat stale")
    # the one form of a time in CLI and API output (ductline.timestamps): UTC, ms, Z
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stale["last_heartbeat"]), stale
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stale["started"]), stale

    # Only this host's processes (a container's probe). The margins are seconds, not
    # tenths: with the suite's four processes a heartbeat can age 0.3 s between two calls.
    store.renew_leases("w-fresh", [], 30_000, busy=3, undead=1, status="running")
    assert runner.invoke(health, ["--max-age", "2", "--host", "host-a", "--database", db_url],
                         env={"DUCTLINE_LEASE_SECONDS": "30"}).exit_code == 0
    # A worker that stopped cleanly is not live: it no longer counts.
    store.worker_stopped("w-stale")
    store.renew_leases("w-fresh", [], 30_000, busy=3, undead=1, status="running")
    result = runner.invoke(health, ["--json", "--max-age", "2", "--database", db_url],
                           env={"DUCTLINE_LEASE_SECONDS": "30"})
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {w["id"]: w["healthy"] for w in report["workers"]} == {"w-fresh": True, "w-stale": None}


def test_default_max_age_is_the_lease_and_a_worker_past_it_is_lost(store, db_url):
    store.register_worker("w", "h", 1, 1)
    time.sleep(0.3)
    out = run_cli("health", "--json", "--database", db_url, env={"DUCTLINE_LEASE_SECONDS": "0.1"})
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["max_age_seconds"] == 0.1 and report["live"] == 0
    assert [(w["health"], w["live"], w["healthy"]) for w in report["workers"]] == [("lost", False, None)]
    assert report["message"] == "no live worker process (1 lost: no heartbeat within the 0.1 s lease)"
    out = run_cli("health", "--database", db_url, env={"DUCTLINE_LEASE_SECONDS": "30"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("healthy: 1 live worker process(es) heartbeated within 30 s")


def test_workers_table(store, db_url):
    store.register_worker("0123456789abcdef", "host-a", 4242, 8)
    store.renew_leases("0123456789abcdef", [], 30_000, busy=5, undead=2, status="stopping")
    result = CliRunner().invoke(workers, ["--database", db_url], env={"COLUMNS": "200"})  # the full table
    assert result.exit_code == 0, result.output
    for text in ("0123456789ab", "host-a", "4242", "stopping", "5", "8", "2", "ok"):
        assert text in result.output
    listed = json.loads(CliRunner().invoke(workers, ["--json", "--database", db_url]).stdout)
    assert [(w["host"], w["pid"], w["busy"], w["undead"], w["status"]) for w in listed] == \
        [("host-a", 4242, 5, 2, "stopping")]


def test_an_unreadable_database_is_exit_2(tmp_path):
    out = run_cli("health", "--database", f"sqlite:///{tmp_path}/missing/dir/ductline.db")
    assert out.returncode == 2
    assert "does not exist" in out.stderr


def test_check_helper(store):
    store.register_worker("w", "h", 1, 1)
    report = checks.check(store, 60, lease_seconds=60)
    assert report.healthy and [w.id for w in report.live] == ["w"]
    assert checks.default_max_age(30) == 30


def test_a_worker_with_too_many_undead_slots_is_live_but_not_healthy(store):
    store.register_worker("w-sick", "host-a", 101, 2)
    store.renew_leases("w-sick", [], 30_000, busy=0, undead=3, status="unhealthy")
    report = checks.check(store, max_age=60, lease_seconds=60)
    assert not report.healthy
    assert [(w.id, w.live, w.healthy, w.problem) for w in report.workers] == \
        [("w-sick", True, False, checks.UNDEAD)]
    assert "host-a:101 (too many undead slots: heartbeat" in report.message
    result = CliRunner().invoke(workers, ["--database", store.url])
    assert "too many undead slots" in result.output and "stale" not in result.output


def test_a_worker_killed_with_sigkill_is_lost_and_its_replacement_makes_the_host_healthy(db_url, workers):
    """A worker killed without a clean exit keeps its row running; once its heartbeat is
    older than the lease it is lost, and a new worker on the same host passes the check."""
    env = {"DUCTLINE_LEASE_SECONDS": "1", "DUCTLINE_HOSTNAME": "probe-host"}
    probe = ("health", "--json", "--host", "probe-host", "--database", db_url)

    def report() -> dict:
        return json.loads(run_cli(*probe, env=env).stdout)

    first = workers(concurrency=1, env=env)
    wait_for(lambda: report()["healthy"])
    first.send_signal(signal.SIGKILL)
    first.wait()
    second = workers(concurrency=1, env=env)
    # Passes as soon as the replacement heartbeats: the killed one is either still
    # within its lease (and judged on it) or lost.
    wait_for(lambda: report()["live"] == 1 and report()["healthy"], timeout=10)
    # Well past two leases (the former default max age) the killed row is lost, not live,
    # and the check still passes: a liveness probe built on it does not restart-loop.
    rows = wait_for(lambda: [w for w in report()["workers"] if w["pid"] == first.pid and w["age_seconds"] > 2.5])
    assert rows[0]["health"] == "lost" and rows[0]["live"] is False and rows[0]["status"] == "running"
    out = run_cli("health", *probe[2:], env=env)
    now = report()
    assert out.returncode == 0 and now["healthy"], (out.stdout, out.stderr)
    assert [w["pid"] for w in now["workers"] if w["live"]] == [second.pid]
    # The dashboard's rule is the same.
    from ductline.store import open_store
    from ductline.web.reader import DashboardReader

    store = open_store(db_url)
    try:
        shown = {w["pid"]: (w["health"], w["live"]) for w in DashboardReader(store).workers(lease_seconds=1)}
    finally:
        store.close()
    assert shown[first.pid] == ("lost", False) and shown[second.pid][1] is True


CHILDREN_FAIL_APP = '''
import os

from ductline import Pipeline

# The worker imports this module first and starts its step children with the
# environment it set: while the marker file exists, every child's import raises.
if os.environ.get("CHILDREN_FAIL_IMPORTED") and os.path.exists(os.environ["CHILDREN_FAIL_MARKER"]):
    raise RuntimeError("the licence server is not reachable\\nfrom this child")
os.environ["CHILDREN_FAIL_IMPORTED"] = "1"


def one(x):
    return x


pipe = Pipeline("children_fail").start(one)
'''


def test_a_worker_whose_step_children_cannot_import_its_app_is_unhealthy_until_one_can(
        tmp_path, db_url, store, workers):
    """The worker imported its app, its children cannot: it restarts them and runs
    nothing. Its row says so (which app, the error's first and last lines), `ductline
    health` exits 1 naming it, the dashboard shows it; a child that starts again
    makes it healthy."""
    app = tmp_path / "children_fail_app.py"
    app.write_text(CHILDREN_FAIL_APP)
    marker = tmp_path / "children-fail"
    marker.write_text("")
    port = _free_port()
    env = {"CHILDREN_FAIL_MARKER": str(marker), "DUCTLINE_LEASE_SECONDS": "30", "DUCTLINE_METRICS_PORT": str(port)}
    worker = workers(concurrency=1, env=env, app=str(app))
    readyz = f"http://127.0.0.1:{port}/readyz"

    def live() -> list[checks.WorkerHealth]:
        return [w for w in checks.worker_table(store, 30, lease_seconds=30) if w.pid == worker.pid and w.live]

    sick = wait_for(lambda: [w for w in live() if w.status == "unhealthy"])[0]
    assert sick.healthy is False and sick.health == "unhealthy"
    assert sick.problem is not None and sick.problem.startswith("step children fail to start (")
    assert sick.problem.endswith(f" in a row): '{app}': importing 'children_fail_app' raised RuntimeError: "
                                 f"the licence server is not reachable ... from this child (at {app}:9)")
    out = run_cli("health", "--database", db_url, env=env)
    assert out.returncode == 1, out.stdout
    assert f":{worker.pid} (step children fail to start (" in out.stderr
    assert f"'{app}': importing 'children_fail_app' raised RuntimeError" in out.stderr
    listed = json.loads(run_cli("workers", "--json", "--database", db_url, env=env).stdout)
    assert [w["problem"] for w in listed if w["pid"] == worker.pid] == [sick.problem]
    from ductline.web.reader import DashboardReader

    shown = [w for w in DashboardReader(store).workers(lease_seconds=30) if w["pid"] == worker.pid]
    assert [(w["health"], w["problem"][:28]) for w in shown] == [("unhealthy", "step children fail to start ")]
    code, body = wait_for(lambda: _get(readyz))
    reason = json.loads(body)["reason"]  # the count in a row goes on as children keep failing
    assert code == 503 and reason.startswith("worker unhealthy: step children fail to start ("), body
    assert reason.split(" in a row)")[1] == sick.problem.split(" in a row)")[1]

    marker.unlink()  # the next child imports the app: the worker runs steps again
    well = wait_for(lambda: [w for w in live() if w.status == "running"])[0]
    assert (well.healthy, well.problem) == (True, None)
    out = run_cli("health", "--database", db_url, env=env)
    assert out.returncode == 0, out.stderr
    code, body = _get(readyz)
    assert code == 200 and json.loads(body)["status"] == "ok", body


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[int, str] | None:
    """``(status, body)``, also for an error status; ``None`` while nothing listens."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except urllib.error.URLError:
        return None


def _failed_starts(log_path: Path) -> list[datetime]:
    """When the worker logged each child that could not import its apps."""
    return [datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f") for line in log_path.read_text().splitlines()
            if "Child could not import the apps" in line]


# The gaps are the worker's own waits between child starts, read from its log: no store
# read or write decides them (the unhealthy state they follow is checked on both
# backends above), so the 7 s of waits run once, on SQLite.
@pytest.mark.parametrize("backend", ["sqlite"])
def test_children_that_keep_failing_to_start_are_restarted_ever_more_slowly(tmp_path, db_url, store, workers):
    """Past the failures a worker tolerates, each new child waits: 1 s after the failure
    that made the worker unhealthy, then 2 s, doubling (an import that fails in a
    fraction of a second no longer has the worker start interpreters back to back)."""
    app = tmp_path / "children_fail_app.py"
    app.write_text(CHILDREN_FAIL_APP)
    marker = tmp_path / "children-fail"
    marker.write_text("")
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log_file:
        workers(concurrency=1, env={"CHILDREN_FAIL_MARKER": str(marker)}, app=str(app), stderr=log_file)

        seen = wait_for(lambda: _failed_starts(log_path) if len(_failed_starts(log_path)) >= 6 else None)
    gaps = [(b - a).total_seconds() for a, b in zip(seen, seen[1:])]
    # The 3rd failure makes the worker unhealthy: the 4th child starts 1 s after it at
    # the earliest, the 5th 2 s after the 4th's failure, the 6th 4 s after the 5th's.
    assert gaps[2] >= 1.0 and gaps[3] >= 2.0 and gaps[4] >= 4.0, gaps


def test_a_worker_with_many_slots_waits_per_round_of_failed_starts_not_per_child(tmp_path, db_url, store, workers):
    """Children that fail together (one per slot, and the spares, started at once)
    make one round: the next round starts 1 s after it, as with one slot. Counted per
    child, a worker with 4 slots went past the doubling at once and waited 30 s before
    its first new child, so a passing failure (a licence server back a second later)
    kept it idle for half a minute."""
    app = tmp_path / "children_fail_app.py"
    app.write_text(CHILDREN_FAIL_APP)
    marker = tmp_path / "children-fail"
    marker.write_text("")
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log_file:
        workers(concurrency=4, env={"CHILDREN_FAIL_MARKER": str(marker)}, app=str(app), stderr=log_file)

        def rounds() -> list[list[datetime]]:
            found: list[list[datetime]] = []
            for at in _failed_starts(log_path):
                if found and (at - found[-1][-1]).total_seconds() < 0.5:
                    found[-1].append(at)
                else:
                    found.append([at])
            return found

        seen = wait_for(lambda: rounds() if len(rounds()) >= 3 else None, timeout=20)
    assert len(seen[0]) >= 4, seen  # a child per slot failed in the first round
    gaps = [(b[0] - a[-1]).total_seconds() for a, b in zip(seen, seen[1:])]
    # 1 s after the first round, 2 s after the second: never more than the wait that
    # round earned plus the child's start.
    assert 1.0 <= gaps[0] < 5.0 and 2.0 <= gaps[1] < 8.0, gaps


CHILDREN_DIE_IDLE_APP = '''
import os
import threading

from ductline import Pipeline

# The worker imports this module first; each step child imports it too and says it
# is ready, and then, while the marker file exists, exits on its own a moment later.
if os.environ.get("CHILDREN_DIE_IMPORTED") and os.path.exists(os.environ["CHILDREN_DIE_MARKER"]):
    threading.Timer(0.2, os._exit, (7,)).start()
os.environ["CHILDREN_DIE_IMPORTED"] = "1"


def one(x):
    return x


pipe = Pipeline("children_die").start(one)
'''


def test_a_step_child_that_exits_while_idle_is_said_in_the_worker_log(tmp_path, db_url, store, workers):
    """A child that said it was ready and then exited on its own, before any attempt,
    is replaced, and the worker says so (folded, with the exit code): a child that
    kept dying this way had the worker start interpreters back to back without a
    line in its log."""
    app = tmp_path / "children_die_app.py"
    app.write_text(CHILDREN_DIE_IDLE_APP)
    marker = tmp_path / "children-die"
    marker.write_text("")
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log_file:
        workers(concurrency=1, env={"CHILDREN_DIE_MARKER": str(marker)}, app=str(app), stderr=log_file)
        said = wait_for(lambda: [line for line in log_path.read_text().splitlines()
                                 if "exited on its own while idle" in line])
    assert "WARNING" in said[0] and "exit code 7" in said[0], said


# Which starts failed is the worker's own count (`ductline.runtime.starts`); the row it
# writes is checked on both backends by the import failure above.
@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_worker_whose_children_exit_soon_after_they_are_ready_is_unhealthy_until_one_lasts(
        tmp_path, db_url, store, workers):
    """Children that say they are ready and then exit on their own, before any attempt,
    failed their starts: the worker is unhealthy, saying so, and restarts them ever more
    slowly; once a child outlives the settling time, it is healthy again."""
    app = tmp_path / "children_die_app.py"
    app.write_text(CHILDREN_DIE_IDLE_APP)
    marker = tmp_path / "children-die"
    marker.write_text("")
    worker = workers(concurrency=1, env={"CHILDREN_DIE_MARKER": str(marker), "DUCTLINE_LEASE_SECONDS": "30"},
                     app=str(app))

    def live() -> list[checks.WorkerHealth]:
        return [w for w in checks.worker_table(store, 30, lease_seconds=30) if w.pid == worker.pid and w.live]

    sick = wait_for(lambda: [w for w in live() if w.status == "unhealthy"])[0]
    assert sick.problem is not None and re.fullmatch(
        r"step children fail to start \(\d+ in a row\): a child exited on its own \(exit code 7\) "
        r"\d+\.\d s after it said it was ready, before any attempt", sick.problem), sick.problem
    marker.unlink()  # the next child lasts
    well = wait_for(lambda: [w for w in live() if w.status == "running"], timeout=60)[0]
    assert (well.healthy, well.problem) == (True, None)
