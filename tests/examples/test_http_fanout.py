"""examples/http_fanout.py end to end: a real worker fetches from the example's test
server; the slow endpoint costs a timeout and a retry, the flaky one two errors."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from types import ModuleType

from examples_helpers import EXAMPLES, at, ductline, env, last_json, show
from helpers import start_worker, stop_worker

from ductline import RunHandle

EXAMPLE = EXAMPLES / "http_fanout.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_http_fanout", EXAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module      # its steps must be importable by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(300)  # processes that start and stop: slow on a loaded machine
def test_fanout_on_a_worker_survives_a_slow_and_a_flaky_endpoint(tmp_path: Path) -> None:
    example = load_example()
    database = f"sqlite:///{tmp_path / 'ductline.db'}"
    with example.TestServer() as server:
        worker = start_worker(database, app=str(EXAMPLE), concurrency=4)
        try:
            args = f'["{server.url}", {list(example.PATHS)!r}]'.replace("'", '"')
            started = last_json(ductline("trigger", f"{EXAMPLE}:fanout", "--args", args, "--json",
                                         "--database", database, cwd=tmp_path))
            handle = RunHandle.attach(started["run_id"], database=database)
            assert handle.wait(90) == "completed", handle.error()
            output = handle.output()
        finally:
            stop_worker(worker)
        hits = dict(server.hits)

    assert output["ok"] == 4
    assert [r["body"]["endpoint"] for r in output["responses"]] == example.PATHS   # URL order
    assert hits["/inventory"] >= 2 and hits["/prices"] >= 3

    view = show(started["run_id"], database, tmp_path)
    fetches = {example.PATHS[s["index"]]: s for s in view["steps"] if s["step"] == "fetch"}
    slow = [a["result"] for a in fetches["/inventory"]["attempts"]]
    assert slow[0] == "timed_out" and slow[-1] == "succeeded", slow
    killed = fetches["/inventory"]["attempts"][0]
    ran = (at(killed["finished_at"]) - at(killed["started_at"])).total_seconds()
    assert example.STEP_TIMEOUT_SECONDS <= ran < example.SLOW_SECONDS, ran   # killed at its deadline
    flaky = [a["result"] for a in fetches["/prices"]["attempts"]]
    assert flaky.count("errored") >= 2 and flaky[-1] == "succeeded", flaky
    assert fetches["/prices"]["attempts"][0]["error_type"].endswith("HTTPStatusError")


def test_the_example_runs_as_a_script(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(EXAMPLE)], cwd=tmp_path, env=env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("completed"), proc.stdout
    assert "timed_out, succeeded" in proc.stdout and "errored, errored, succeeded" in proc.stdout
