"""Starting workers (`ductline.runtime.launch`): which pipelines a worker serves, and
the supervisor of ``ductline worker --processes N``, driven with stand-in worker
commands (real processes that only report their signals)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import rt_app
from helpers import wait_for

from ductline import Pipeline
from ductline.config import load_settings
from ductline.dsl.pipeline import _REGISTRY
from ductline.errors import TargetError
from ductline.runtime.launch import build_worker, worker_argv
from ductline.store import open_store

APP = str(Path(__file__).parent.parent / "apps" / "rt_app.py")


@pytest.fixture
def store(tmp_path):
    """Which pipelines a worker serves does not depend on the backend: SQLite only."""
    store = open_store(f"sqlite:///{tmp_path}/launch.db")
    store.migrate()
    yield store
    store.close()


@pytest.fixture
def registry():
    """The process's pipeline registry, emptied for the test and put back after it."""
    saved = dict(_REGISTRY)
    _REGISTRY.clear()
    yield _REGISTRY
    _REGISTRY.clear()
    _REGISTRY.update(saved)


def test_only_serves_that_one_pipeline(store):
    worker = build_worker(store, [APP], 1, load_settings(database_url=store.url), only="rt_single")
    assert list(worker.definitions) == ["rt_single"]


def test_an_invalid_pipeline_is_left_out_and_the_valid_ones_are_served(store, registry, caplog):
    registry["rt_single"] = rt_app.single
    Pipeline("launch_no_start")  # never given a first step
    worker = build_worker(store, [], 1, load_settings(database_url=store.url))
    assert list(worker.definitions) == ["rt_single"]
    assert "Pipeline 'launch_no_start' is invalid and will not be run: pipeline 'launch_no_start' has no start " \
           "step" in caplog.text


def test_apps_that_define_no_pipeline_are_refused(store, registry):
    with pytest.raises(TargetError, match=r"the apps \[\] define no ductline Pipeline"):
        build_worker(store, [], 1, load_settings(database_url=store.url))


def test_the_command_each_worker_process_runs():
    assert worker_argv(["a.py", "pkg.app"], 3, "sqlite:///x.db") == [
        sys.executable, "-m", "ductline", "worker", "--processes", "1", "--concurrency", "3",
        "--app", "a.py", "--app", "pkg.app", "--database", "sqlite:///x.db"]
    assert worker_argv(["a.py"], 2, None)[-2:] == ["--app", "a.py"]


# A stand-in worker: notes its start (after its SIGTERM handler is in place) with the
# metrics port it was given, and notes the SIGTERM it gets before it exits.
STAND_IN = r"""
import os, signal, sys
out = sys.argv[1]
def stop(signum, frame):
    open(f"{out}/{os.getpid()}.term", "w").close()
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
with open(f"{out}/{os.getpid()}.tmp", "w") as f:
    f.write(os.environ["DUCTLINE_METRICS_PORT"])
os.rename(f"{out}/{os.getpid()}.tmp", f"{out}/{os.getpid()}.start")
while True:
    signal.pause()
"""

# As `ductline worker --processes 2` runs it: with the CLI's logging (the library
# itself configures none, so without it the supervisor's lines would go nowhere).
SUPERVISOR = ("import json, sys\nfrom ductline.logs import configure\nfrom ductline.runtime.launch import supervise\n"
              "configure()\nsys.exit(supervise(json.loads(sys.argv[1]), 2, restart_delay=0))")


def supervisor(out: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", STAND_IN, str(out)]
    return subprocess.Popen([sys.executable, "-c", SUPERVISOR, json.dumps(argv)], text=True, stderr=subprocess.PIPE,
                            env={**os.environ, "DUCTLINE_METRICS_PORT": "9300"})


def started(out: Path) -> dict[int, int]:
    """``{pid: metrics port}`` of the stand-ins that started."""
    return {int(p.stem): int(p.read_text()) for p in out.glob("*.start")}


def terminated(out: Path) -> set[int]:
    return {int(p.stem) for p in out.glob("*.term")}


def test_the_supervisor_restarts_a_worker_that_died_and_passes_sigterm_on(tmp_path):
    proc = supervisor(tmp_path)
    try:
        wait_for(lambda: len(started(tmp_path)) == 2)
        first = started(tmp_path)
        assert sorted(first.values()) == [9300, 9301]  # one metrics port each
        victim = next(pid for pid, port in first.items() if port == 9301)
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: len(started(tmp_path)) == 3)
        [(new, port)] = [(pid, port) for pid, port in started(tmp_path).items() if pid not in first]
        assert port == 9301  # it took the place, and the port, of the one that died
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        _, stderr = proc.communicate()
    assert terminated(tmp_path) == set(started(tmp_path)) - {victim}
    assert f"Worker process {victim} exited with -9; restarting" in stderr


def test_workers_get_sigterm_when_their_supervisor_is_killed(tmp_path):
    proc = supervisor(tmp_path)
    try:
        wait_for(lambda: len(started(tmp_path)) == 2)
    finally:
        proc.kill()
        proc.communicate()
    wait_for(lambda: terminated(tmp_path) == set(started(tmp_path)))


@pytest.mark.parametrize("port", ["\u0669\u0663\u0660\u0660", "93_00", "http"])
def test_the_supervisor_refuses_a_metrics_port_not_in_ascii_digits_before_starting_any(tmp_path, port):
    argv = [sys.executable, "-c", STAND_IN, str(tmp_path)]
    proc = subprocess.run([sys.executable, "-c", SUPERVISOR, json.dumps(argv)], text=True, capture_output=True,
                          env={**os.environ, "DUCTLINE_METRICS_PORT": port}, timeout=120)
    assert proc.returncode != 0
    assert f"ConfigurationError: DUCTLINE_METRICS_PORT: {port!r} is not a TCP port" in proc.stderr
    assert started(tmp_path) == {}
