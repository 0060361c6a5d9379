"""A worker parent that cannot heartbeat (frozen with SIGSTOP) does not let its
child outlive its lease: the child stops itself at the lease horizon, another
worker rescues the job, and the two executions never overlap. The frozen parent,
continued, drops its stale attempt and serves again."""

from __future__ import annotations

import signal
from pathlib import Path

from helpers import freeze_outside_a_write, start_worker, stop_worker, wait_for

import watchdog_app
from ductline.views import run_view

APP = str(Path(__file__).parent.parent / "apps" / "watchdog_app.py")


def _marks(path):
    """``{(attempt, pid): [monotonic times]}`` written by the step from inside."""
    found = {}
    if not path.exists():
        return found
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            found.setdefault((int(parts[0]), int(parts[1])), []).append(float(parts[2]))
    return found


def _gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_a_frozen_parent_s_child_stops_at_the_lease_horizon(store, tmp_path):
    marks = tmp_path / "marks.txt"
    frozen = start_worker(store.url, concurrency=1, app=APP)
    rescuer = None
    try:
        handle = watchdog_app.marked.trigger(str(marks), database=store)
        [(_, first_pid)] = wait_for(lambda: list(_marks(marks)), timeout=60)
        freeze_outside_a_write(frozen, store.url)  # frozen inside a SQLite write, it would hold the rescuer too
        rescuer = start_worker(store.url, concurrency=1, app=APP)
        assert handle.wait(90) == "completed"
        wait_for(lambda: _gone(first_pid), timeout=30)
        session_pid = int((tmp_path / "marks.txt.session").read_text())
        wait_for(lambda: _gone(session_pid), timeout=30)
        found = _marks(marks)
        first = found.pop((1, first_pid))
        [((attempt, pid), second)] = found.items()
        assert attempt == 2 and pid != first_pid
        # The stopped execution's last moment comes before the rescue's first.
        assert max(first) < min(second), (max(first), min(second))
        results = [a["result"] for a in run_view(store, handle.id)["steps"][0]["attempts"]]
        assert results == ["crashed", "succeeded"]
        frozen.send_signal(signal.SIGCONT)
        assert stop_worker(rescuer) == 0
        # Continued, the parent finds its lease lost, drops the attempt, and serves again.
        later = watchdog_app.healthy.trigger(1, database=store)
        assert later.wait(60) == "completed"
        assert frozen.poll() is None
        assert stop_worker(frozen) == 0
        assert _marks(marks).keys() == {(1, first_pid), (2, pid)}
    finally:  # whatever failed above, no worker outlives the test
        frozen.send_signal(signal.SIGCONT)
        for worker in (frozen, rescuer):
            if worker is not None:
                stop_worker(worker)
