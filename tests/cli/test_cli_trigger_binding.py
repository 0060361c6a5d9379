"""Arguments the first step cannot take are refused at trigger time, on both
backends, by every way of starting a run: `Pipeline.trigger`, `trigger_many`,
``ductline trigger``, ``ductline run`` and the API. A `TypeError`
(`ductline.StepSignatureError`), and nothing written. The rule is the one the
step's attempt applies: a function, an ``async def`` and a `ductline.Step`
subclass (by its constructor) alike."""

from __future__ import annotations

import os
import subprocess
import sys

import cli_app
import pytest
from starlette.testclient import TestClient

import ductline
from ductline.operations.bound import RunOperations
from ductline.store import Store
from ductline.web import create_app

APP = cli_app.__file__


def nothing_written(store: Store) -> bool:
    return store.list_runs(limit=10) == []


@pytest.mark.parametrize(("pipeline", "args", "expected"), [
    pytest.param(cli_app.pair_pipeline, (1,), r"pair\(a, b\) but got 1 argument \(int\)", id="too-few"),
    pytest.param(cli_app.pair_pipeline, (1, 2, 3), r"pair\(a, b\) but got 3 arguments", id="too-many"),
    pytest.param(cli_app.defaults_pipeline, (), r"one_or_two\(a, b=0\) but got 0 arguments", id="none"),
    pytest.param(cli_app.async_pipeline, ("x",), r"async_pair\(a, b\) but got 1 argument \(str\)", id="async"),
    pytest.param(cli_app.class_pipeline, ({"k": 1},), r"Pair\(a, b\) but got 1 argument \(dict\)", id="class"),
])
def test_trigger_refuses_arguments_the_first_step_cannot_take(store, pipeline, args, expected):
    with pytest.raises(ductline.StepSignatureError, match=expected) as caught:
        pipeline.trigger(*args, database=store)
    assert isinstance(caught.value, TypeError)
    assert caught.value.step == pipeline.definition().start
    assert nothing_written(store)


@pytest.mark.parametrize(("pipeline", "args"), [
    (cli_app.pair_pipeline, (1, 2)), (cli_app.defaults_pipeline, (1,)), (cli_app.defaults_pipeline, (1, 2)),
    (cli_app.async_pipeline, (1, 2)), (cli_app.class_pipeline, (1, 2)), (cli_app.anything_pipeline, ()),
    (cli_app.anything_pipeline, (1, 2, 3)),
])
def test_arguments_that_bind_start_a_run(store, pipeline, args):
    handle = pipeline.trigger(*args, database=store)
    assert store.get_run(handle.id)["status"] == "pending"


def test_trigger_many_refuses_the_whole_batch_and_names_the_element(store):
    with pytest.raises(TypeError, match=r"^trigger_many element 2 \(its arguments\): step 'pair' cannot take "
                                        r"its arguments: it expects pair\(a, b\) but got 1 argument"):
        cli_app.pair_pipeline.trigger_many([(1, 2), (3, 4), 5, (6, 7)], database=store)
    assert nothing_written(store)
    assert len(cli_app.pair_pipeline.trigger_many([(1, 2), (3, 4)], database=store)) == 2


def test_the_operations_layer_refuses_them_for_every_caller(store):
    with pytest.raises(ductline.StepSignatureError):
        RunOperations(store).trigger(cli_app.pair_pipeline.definition(), (1,))
    assert nothing_written(store)


def test_the_api_answers_422_and_writes_nothing(store, monkeypatch):
    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    auth = {"Authorization": "Bearer binding-token"}
    with TestClient(create_app(store, token="binding-token", poll_seconds=0.05), base_url="http://localhost") as c:
        refused = c.post("/api/pipelines/cli_pair/runs", json={"args": [1]}, headers=auth)
        assert refused.status_code == 422, refused.text
        assert "step 'pair' cannot take its arguments: it expects pair(a, b) but got 1 argument" in refused.text
        assert nothing_written(store)
        started = c.post("/api/pipelines/cli_pair/runs", json={"args": [1, 2]}, headers=auth)
        assert started.status_code == 201, started.text


def ductline_cli(*words: str, cwd=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ductline", *words], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, "COLUMNS": "80"})


@pytest.mark.parametrize("command", ["trigger", "run"])
def test_the_cli_refuses_them_with_one_error_line(store, db_url, command):
    done = ductline_cli(command, f"{APP}:class_pipeline", "--args", '[{"k": 1}]', "--database", db_url)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("error: StepSignatureError: step 'Pair' cannot take its arguments: it expects "
                                  "Pair(a, b) but got 1 argument (dict)"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert nothing_written(store)


def test_run_refuses_them_before_it_creates_a_database(tmp_path):
    done = ductline_cli("run", f"{APP}:pair_pipeline", "--args", "[1]", "--database",
                        f"sqlite:///{tmp_path / 'new.db'}", cwd=tmp_path)
    assert done.returncode == 2 and "StepSignatureError" in done.stderr, done.stderr
    assert not (tmp_path / "new.db").exists()
