"""A fleet of real worker processes with distinct host identities, and the chaos
that kills them (import as `fleet_support`; used by tests/fleet and bench/fleet.py).

Each worker process is ``ductline worker`` in a process group of its own (a session:
killing the group kills the worker parent and its children, as losing a host
would), registered under its own host name (the ``hostname`` setting).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

APPS = Path(__file__).parent / "apps"
FLEET_APP = str(APPS / "fleet_app.py")


@dataclass
class Fleet:
    """``size`` worker processes against ``url``; ``env`` is added to each one's."""

    url: str
    size: int
    concurrency: int = 1
    env: dict[str, str] = field(default_factory=dict)
    log_dir: str | None = None
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    killed: list[tuple[str, int]] = field(default_factory=list)  # (host, pid) of every kill
    starts: int = 0

    def host(self, index: int) -> str:
        return f"fleet-host-{index:02d}"

    def start(self, index: int) -> subprocess.Popen[bytes]:
        env = {**os.environ, **self.env, "DUCTLINE_HOSTNAME": self.host(index)}
        out: Any = subprocess.DEVNULL
        if self.log_dir is not None:
            out = open(os.path.join(self.log_dir, f"{self.host(index)}.log"), "ab")  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ductline", "--log-level", "WARNING", "worker", "--app", FLEET_APP,
                 "--database", self.url, "--concurrency", str(self.concurrency)],
                env=env, stdout=out, stderr=out, start_new_session=True)
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        self.procs[index] = proc
        self.starts += 1
        return proc

    def start_all(self) -> None:
        for index in range(self.size):
            self.start(index)

    def kill_one(self, rng: random.Random) -> int:
        """SIGKILL the process group of a random live worker and start it again
        under the same host name; returns the index."""
        index = rng.choice(sorted(self.procs))
        proc = self.procs[index]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker and its children: a lost host
        proc.wait()
        self.killed.append((self.host(index), proc.pid))
        self.start(index)
        return index

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


class Chaos:
    """Kills a random worker of ``fleet`` every ``low``..``high`` seconds (a load
    pattern, not a synchronization) until stopped."""

    def __init__(self, fleet: Fleet, low: float, high: float, seed: int = 16) -> None:
        self.fleet = fleet
        self.low, self.high = low, high
        self.rng = random.Random(seed)
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="chaos")

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.rng.uniform(self.low, self.high)):
                self.fleet.kill_one(self.rng)
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)

    def __enter__(self) -> "Chaos":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def verify(conn: Any, run_ids: list[str], killed: list[tuple[str, int]], width: int) -> dict[str, int]:
    """Check the fleet's work on a psycopg connection: every run completed with the
    right output, every job completed with exactly one succeeded attempt, and every
    other attempt crashed on a worker that was killed. Returns counts.

    Raises:
        AssertionError: with the first offending rows.
    """
    runs = conn.execute("SELECT id, status, output FROM ductline_runs WHERE id = ANY(%s)", (run_ids,)).fetchall()
    assert len(runs) == len(run_ids), f"{len(run_ids) - len(runs)} run(s) missing"
    expected = {"total": sum(x * x for x in range(width))}
    bad = [r for r in runs if r[1] != "completed" or json.loads(r[2]) != expected]
    assert not bad, f"{len(bad)} run(s) not completed as expected, e.g. {bad[:3]}"
    jobs_per_run = width + 3
    jobs = conn.execute("SELECT count(*), count(*) FILTER (WHERE status = 'completed') FROM ductline_jobs "
                        "WHERE run_id = ANY(%s)", (run_ids,)).fetchone()
    assert jobs[0] == jobs[1] == len(run_ids) * jobs_per_run, jobs
    not_once = conn.execute(
        "SELECT j.id, j.step, count(*) FILTER (WHERE a.result = 'succeeded') AS ok FROM ductline_jobs j "
        "LEFT JOIN ductline_attempts a ON a.job_id = j.id WHERE j.run_id = ANY(%s) GROUP BY j.id, j.step "
        "HAVING count(*) FILTER (WHERE a.result = 'succeeded') <> 1 LIMIT 5", (run_ids,)).fetchall()
    assert not not_once, f"steps without exactly one succeeded attempt: {not_once}"
    extra = conn.execute(
        "SELECT a.job_id, a.result, w.host, w.pid FROM ductline_attempts a "
        "LEFT JOIN ductline_workers w ON w.id = a.worker_id "
        "WHERE a.run_id = ANY(%s) AND a.result IS DISTINCT FROM 'succeeded'", (run_ids,)).fetchall()
    killed_set = {(host, pid) for host, pid in killed}
    unexplained = [e for e in extra if e[1] != "crashed" or (e[2], e[3]) not in killed_set]
    assert not unexplained, f"{len(unexplained)} extra execution(s) not explained by a kill: {unexplained[:5]}"
    attempts = conn.execute("SELECT count(*) FROM ductline_attempts WHERE run_id = ANY(%s)",
                            (run_ids,)).fetchone()[0]
    return {"runs": len(run_ids), "jobs": int(jobs[0]), "attempts": int(attempts), "crashed": len(extra),
            "kills": len(killed)}
