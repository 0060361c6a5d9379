"""Mark succeeded on both backends, with real workers: a step run that failed, is held
or was cancelled by a fail_fast sibling is recorded completed with the operator's
output without running it, and the run continues from there (a halted run revived as
a retry revives it); the history says who, when and why; refusals change nothing; a
process killed inside the mark leaves nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import rt_app
from helpers import APP, ductline_in_process, start_worker, stop_worker, wait_for

from ductline.errors import InvalidStateError
from ductline.handle import RunHandle
from ductline.operations.mark import mark_succeeded
from ductline.views import run_view


def halted(store, db_url, pipeline, *args):
    run = pipeline.trigger(*args, database=store)
    proc = start_worker(db_url, concurrency=2)
    try:
        wait_for(lambda: run.status() == "halted"
                 and all(j["status"] not in ("running", "pending") for j in store.run_jobs(run.id)), timeout=60)
    finally:
        stop_worker(proc)
    return run


def step_run(store, run_id, step):
    (found,) = [s for s in run_view(store, run_id)["steps"] if s["step"] == step]
    return found


def test_a_paid_step_that_failed_after_paying_is_marked_and_the_run_completes(db_url, store):
    run = halted(store, db_url, rt_app.unsafe, 1)
    assert store.get_run(run.id)["halt_reason"] == "unsafe_to_retry"
    marked = mark_succeeded(store, rt_app.unsafe.definition(), run.id, "pays_then_fails", {"charge": "ch_1"},
                            reason="the provider charged the card", actor="ana")
    assert marked.revived and marked.run_completed
    view = run_view(store, run.id)
    assert view["status"] == "completed" and view["output"] == {"charge": "ch_1"}
    step = step_run(store, run.id, "pays_then_fails")
    assert step["status"] == "completed" and [a["result"] for a in step["attempts"]] == ["errored"]
    (action,) = view["operator_actions"]
    assert (action["action"], action["step"], action["actor"], action["reason"], action["previous_status"],
            action["output"]) == ("mark_succeeded", "pays_then_fails", "ana", "the provider charged the card",
                                  "failed", {"charge": "ch_1"})
    assert action["at"]
    assert step["marked"] == {"actor": "ana", "at": action["at"], "reason": "the provider charged the card"}
    assert all(s["marked"] is None for s in view["steps"] if s["step"] != "pays_then_fails")
    with pytest.raises(InvalidStateError, match="completed"):  # a finished run is never changed
        mark_succeeded(store, rt_app.unsafe.definition(), run.id, "pays_then_fails", 1)
    # ductline show's steps table says who marked it, not the error its attempt left
    # (the attempts table below keeps that error: it is the attempt's history).
    error = step["attempts"][-1]["error_type"]
    for columns in ("200", "80"):
        shown = ductline_in_process("show", run.id, "--database", db_url, env={"COLUMNS": columns})
        lines = shown.stdout.splitlines()
        row = next(line for line in lines if "pays_then_fails" in line)  # the steps table comes first
        assert "marked succeeded by ana" in row and error not in row, shown.stdout
        assert any(error in line for line in lines[lines.index(row) + 1:]), shown.stdout


def test_a_halted_run_continues_through_its_next_steps_on_a_worker(db_url, store):
    run = halted(store, db_url, rt_app.failing, 1)
    marked = mark_succeeded(store, rt_app.failing.definition(), run.id, "always_fails", 41, actor="ops")
    assert marked.revived and marked.enqueued == {"never_runs": 1} and not marked.run_completed
    assert store.get_run(run.id)["status"] == "running"
    proc = start_worker(db_url, concurrency=1)
    try:
        assert RunHandle(run.id, store).wait(60) == "completed"
    finally:
        stop_worker(proc)
    assert json.loads(store.get_run(run.id)["output"]) == 41
    assert step_run(store, run.id, "never_runs")["attempts"][0]["result"] == "succeeded"


def test_a_step_cancelled_by_fail_fast_is_marked_and_the_fan_in_gathers_it(db_url, store):
    run = halted(store, db_url, rt_app.fail_fast, 1)
    assert step_run(store, run.id, "stuck")["status"] == "cancelled"
    with pytest.raises(InvalidStateError, match="quick has completed already"):
        mark_succeeded(store, rt_app.fail_fast.definition(), run.id, "quick", 0)
    first = mark_succeeded(store, rt_app.fail_fast.definition(), run.id, "stuck", "slow one", actor="ops")
    # Revived as a retry revives it: the failed sibling runs again (and fails again).
    assert first.revived and step_run(store, run.id, "fails_at_once")["status"] == "pending"
    again = halted_again(store, db_url, run.id)
    assert again == "halted" and step_run(store, run.id, "stuck")["status"] == "completed"
    second = mark_succeeded(store, rt_app.fail_fast.definition(), run.id, "fails_at_once", "fixed", actor="ops")
    assert second.enqueued == {"after": 1}
    proc = start_worker(db_url, concurrency=1)
    try:
        assert RunHandle(run.id, store).wait(60) == "completed"
    finally:
        stop_worker(proc)
    assert json.loads(store.get_run(run.id)["output"]) == ["fixed", "slow one"]  # in to= order
    assert [a["step"] for a in run_view(store, run.id)["operator_actions"]] == ["stuck", "fails_at_once"]


def halted_again(store, db_url, run_id):
    proc = start_worker(db_url, concurrency=1)
    try:
        wait_for(lambda: store.get_run(run_id)["status"] == "halted", timeout=60)
    finally:
        stop_worker(proc)
    return store.get_run(run_id)["status"]


def test_refusals_change_nothing(store):
    run = rt_app.chain.trigger(1, database=store)
    definition = rt_app.chain.definition()
    with pytest.raises(InvalidStateError, match="add_one is pending"):
        mark_succeeded(store, definition, run.id, "add_one", 2)
    with pytest.raises(InvalidStateError, match="no step run double"):
        mark_succeeded(store, definition, run.id, "double", 2)
    with pytest.raises(InvalidStateError, match="no step 'nope'"):
        mark_succeeded(store, definition, run.id, "nope", 2)
    with pytest.raises(TypeError):
        mark_succeeded(store, definition, run.id, "add_one", {1, 2})
    with pytest.raises(ValueError, match="at most 1000"):
        mark_succeeded(store, definition, run.id, "add_one", 2, reason="x" * 1001)
    run.cancel()
    with pytest.raises(InvalidStateError, match="the run is cancelled"):
        mark_succeeded(store, definition, run.id, "add_one", 2)
    assert run_view(store, run.id)["operator_actions"] == []
    assert step_run(store, run.id, "add_one")["status"] == "skipped"  # as the cancel left it


def cli(db_url, *args):
    """The command run by the command line's entry point in this process: what it prints
    and exits with."""
    return ductline_in_process("mark-succeeded", *args, "--app", APP, "--database", db_url)


def cli_process(db_url, *args, env):
    """The command in a process of its own (one a fault checkpoint can kill)."""
    return subprocess.run([sys.executable, "-m", "ductline", "mark-succeeded", *args, "--app", APP,
                           "--database", db_url], capture_output=True, text=True, timeout=60, env=env)


def test_cli_killed_inside_the_mark_leaves_nothing_then_marks_once(db_url, store):
    run = halted(store, db_url, rt_app.unsafe, 1)
    killed = cli_process(db_url, run.id, "pays_then_fails", "--output", '"paid"',
                         env={**os.environ, "DUCTLINE_FAULT": "during_mark"})
    assert killed.returncode == -signal.SIGKILL
    assert store.get_run(run.id)["status"] == "halted" and run_view(store, run.id)["operator_actions"] == []
    assert step_run(store, run.id, "pays_then_fails")["status"] == "failed"
    done = cli(db_url, run.id[:8], "pays_then_fails", "--output", '"paid"', "--reason", "charged\nFAKE: done")
    assert done.returncode == 0, done.stderr
    assert "marked succeeded" in done.stdout and "the run completed" in done.stdout
    assert "marked succeeded" not in done.stderr, done.stderr  # said once, not again in a log line
    again = cli(db_url, run.id, "pays_then_fails", "--output", '"paid"')
    assert again.returncode != 0 and "completed" in again.stderr
    bad = cli(db_url, run.id, "pays_then_fails", "--output", "{nope")
    assert bad.returncode != 0 and "not valid JSON" in bad.stderr
    deep = cli(db_url, run.id, "pays_then_fails", "--output", "[" * 60_000)
    assert (deep.returncode, "Traceback" in deep.stderr) == (2, False), deep.stderr
    assert "--output is nested too deeply" in deep.stderr
    shown = ductline_in_process("show", run.id, "--database", db_url)
    # the reason is the operator's text: on one line, it cannot forge a line of its own
    assert "marked pays_then_fails succeeded (it was failed): charged\\nFAKE: done" in shown.stdout
    assert not any(line.startswith("FAKE") for line in shown.stdout.splitlines())
    assert len(run_view(store, run.id)["operator_actions"]) == 1


TOKEN = "mark-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def client(store, monkeypatch):
    from starlette.testclient import TestClient

    from ductline.web import create_app

    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    with TestClient(create_app(store, token=TOKEN, poll_seconds=0.05), base_url="http://localhost") as c:
        yield c


def test_api_marks_with_the_token_and_refuses_precisely(db_url, store, client):
    run = halted(store, db_url, rt_app.failing, 1)
    url = f"/api/runs/{run.id}/mark-succeeded"
    assert client.post(url, json={"step": "always_fails", "output": 1}).status_code == 401
    assert client.post(url, json={"step": "always_fails"}, headers=AUTH).status_code == 422
    huge = client.post(url, content=b'{"step": "always_fails", "output": "' + b"x" * 1_100_000 + b'"}',
                       headers={**AUTH, "Content-Type": "application/json"})
    assert huge.status_code == 413 and "the limit is 1048576" in huge.json()["error"]  # as every endpoint
    assert client.post(url, json={"step": "never_runs", "output": 1}, headers=AUTH).status_code == 409
    assert client.post("/api/runs/nope0000/mark-succeeded", json={"step": "x", "output": 1},
                       headers=AUTH).status_code == 404
    assert run_view(store, run.id)["operator_actions"] == []
    done = client.post(url, json={"step": "always_fails", "output": [1, 2], "reason": "fixed by hand"},
                       headers=AUTH)
    assert done.status_code == 200, done.text
    assert done.json() == {"run_id": run.id, "step": "always_fails", "revived": True,
                           "enqueued": {"never_runs": 1}, "run_completed": False}
    (action,) = client.get(f"/api/runs/{run.id}").json()["operator_actions"]
    assert action["actor"] == "dashboard (testclient)" and action["reason"] == "fixed by hand"
    assert action["output"] == [1, 2]
    again = client.post(url, json={"step": "always_fails", "output": 1}, headers=AUTH)
    assert again.status_code == 409 and "completed already" in again.json()["error"]


def test_dashboard_action_needs_login_and_csrf_and_shows_the_history(db_url, store, client):
    import re

    run = halted(store, db_url, rt_app.unsafe, 1)
    page = client.get(f"/runs/{run.id}").text
    assert "mark-succeeded" not in page  # not logged in: no action form
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
    client.post("/login", data={"token": TOKEN, "csrf": csrf, "next": "/"}, follow_redirects=False)
    page = client.get(f"/runs/{run.id}").text
    assert 'action="/runs/' + run.id + '/mark-succeeded"' in page and '<option value="pays_then_fails">' in page
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    forged = client.post(f"/runs/{run.id}/mark-succeeded",
                         data={"csrf": "wrong", "step": "pays_then_fails", "output": "1"}, follow_redirects=False)
    assert forged.status_code == 403 and store.get_run(run.id)["status"] == "halted"
    bad = client.post(f"/runs/{run.id}/mark-succeeded",
                      data={"csrf": csrf, "step": "pays_then_fails", "output": "{nope"}, follow_redirects=True)
    assert "Not marked" in bad.text and store.get_run(run.id)["status"] == "halted"
    # An index in other scripts' digits is no index: the whole text is the step's name.
    arabic = client.post(f"/runs/{run.id}/mark-succeeded",
                         data={"csrf": csrf, "step": "pays_then_fails[\u0660]", "output": "1"}, follow_redirects=True)
    assert "has no step &#39;pays_then_fails[\u0660]&#39;" in arabic.text, arabic.text
    assert store.get_run(run.id)["status"] == "halted"
    done = client.post(f"/runs/{run.id}/mark-succeeded",
                       data={"csrf": csrf, "step": "pays_then_fails", "output": '"paid"', "reason": "charged"},
                       follow_redirects=True)
    assert "marked succeeded" in done.text
    assert store.get_run(run.id)["status"] == "completed"
    assert "Operator actions" in done.text and "charged" in done.text
    # the step run says who marked it (its failed attempt stays in its table)
    assert re.search(r'<span class="marked-note" title="[^"]+: charged">marked succeeded by dashboard \(', done.text)


def test_execute_marks_a_halted_step_and_checks_its_option():
    import ductline

    result = ductline.execute(rt_app.halts_before_deadline, 1, mark_succeeded={"fails_at_once": [5]},
                              retry_delay=0)
    assert result.status == "completed" and result.metadata["output"] == [5]
    assert [(s.step, s.status) for s in result.steps] == [("quick", "completed"), ("fails_at_once", "completed")]
    untouched = ductline.execute(rt_app.chain, 1, mark_succeeded={"double": 0}, retry_delay=0)
    assert untouched.status == "completed" and untouched.metadata["output"] == 16  # nothing failed
    with pytest.raises(ValueError, match="no such step"):
        ductline.execute(rt_app.chain, 1, mark_succeeded={"nope": 1})
    with pytest.raises(TypeError, match="mapping"):
        ductline.execute(rt_app.chain, 1, mark_succeeded=["double"])
    with pytest.raises(TypeError):
        ductline.execute(rt_app.chain, 1, mark_succeeded={"double": {1, 2}})


# -- which step run of an expanded step ---------------------------------------------------------
FAN_APP = '''
from ductline import Pipeline


def three(n):
    return [n, n + 1, n + 2]


def part(x):
    raise ValueError("part failed")


def gather(xs):
    return xs


fan_fails = Pipeline("mark_fan_fails").start(three).expand(to=part, max_retry=1).collapse(into=gather)
fan_pending = Pipeline("mark_fan_pending").start(three).expand(to=part).collapse(into=gather)
'''


@pytest.fixture(scope="module")
def fan_app(tmp_path_factory):
    """The app file (imported once per process: a module name is imported once)."""
    from ductline.apps import import_app

    path = tmp_path_factory.mktemp("fan") / "mark_fan_app.py"
    path.write_text(FAN_APP, encoding="utf-8")
    module, _ = import_app(str(path))
    return str(path), module.fan_fails, module.fan_pending


def fail_one_element(store, pipeline, run_id):
    """Run the first step, then fail one element of the expand for good: the run
    halts, its other elements are held. Returns the failed element's index."""
    from ductline import codec
    from ductline.engine import record
    from ductline.model.outcomes import Ended
    from ductline.model.states import AttemptResult

    definition = pipeline.definition()
    (first,) = store.claim("t", [pipeline.name], 1, 60_000)
    with store.transaction() as tx:
        record.success(tx, definition, record.Attempt(first.job_id, first.run_id, first.step, first.scope,
                                                      first.attempt, first.lease_token),
                       codec.dumps(definition.node(first.step).func(*codec.loads(first.input))), 0)
    (element,) = store.claim("t", [pipeline.name], 1, 60_000)
    with store.transaction() as tx:
        record.failure(tx, definition, record.Attempt(element.job_id, element.run_id, element.step, element.scope,
                                                      element.attempt, element.lease_token),
                       Ended(AttemptResult.ERRORED, "ValueError", "part failed"), None)
    assert store.get_run(run_id)["status"] == "halted"
    return next(j["elem_index"] for j in store.run_jobs(run_id) if j["id"] == element.job_id)


def test_an_expanded_step_named_without_index_says_which_indexes_may_be_marked(fan_app, db_url, store):
    path, pipeline, waiting = fan_app
    pending = waiting.trigger(1, database=store)
    (first,) = store.claim("t", [waiting.name], 1, 60_000)
    from ductline import codec
    from ductline.engine import record

    with store.transaction() as tx:
        record.success(tx, waiting.definition(), record.Attempt(first.job_id, first.run_id, first.step, first.scope,
                                                                first.attempt, first.lease_token),
                       codec.dumps([1, 2, 3]), 0)
    # None of three pending step runs may be marked: the message says what they are.
    with pytest.raises(InvalidStateError) as none:
        mark_succeeded(store, waiting.definition(), pending.id, "part", 5)
    assert str(none.value) == (
        f"run {pending.id}: step part has 3 step runs (indexes 0-2) and none may be marked succeeded (only a "
        "failed, held or cancelled one may; pending: 0-2)")

    run = pipeline.trigger(10, database=store)
    failed = fail_one_element(store, pipeline, run.id)
    assert sorted(j["status"] for j in store.run_jobs(run.id) if j["step"] == "part") == ["failed", "held", "held"]
    # Three may be marked (one failed, two held): the CLI says which, and how to choose.
    done = ductline_in_process("mark-succeeded", run.id, "part", "--output", "1", "--app", path, "--database", db_url)
    assert done.returncode == 2, done
    assert (f"run {run.id}: step part has 3 step runs (indexes 0-2); those that may be marked succeeded are 0-2: "
            "name one by its index (--index N on the command line, index= in Python, \"index\" in the API)"
            ) in done.stderr
    assert all(j["status"] != "completed" for j in store.run_jobs(run.id) if j["step"] == "part")
    with pytest.raises(InvalidStateError, match=r"has no step run part\[7\] \(its step runs have indexes 0-2\)"):
        mark_succeeded(store, pipeline.definition(), run.id, "part", 5, index=7)
    marked = mark_succeeded(store, pipeline.definition(), run.id, "part", 5, index=failed, actor="ops")
    assert marked.revived
    assert step_run_at(store, run.id, "part", failed)["status"] == "completed"
    # The run page's table of the elements says who marked it, not the error it left.
    from starlette.testclient import TestClient

    from ductline.web import create_app

    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        page = client.get(f"/runs/{run.id}").text
    (row,) = [r for r in page.split("<tr") if "marked succeeded by ops" in r]
    assert "part failed" not in row and "ValueError" not in row, row


def step_run_at(store, run_id, step, index):
    (found,) = [s for s in run_view(store, run_id)["steps"] if s["step"] == step and s["index"] == index]
    return found
