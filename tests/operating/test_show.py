"""``ductline show RUN_ID`` prints each attempt with its start, end and duration
(the tutorial's "each attempt with its result, timings"), as ``--json`` gives them.
Both backends, by the command line's entry point (in the test process)."""

from __future__ import annotations

import json

import rt_app
from helpers import drive, ductline_in_process

from ductline import Pipeline
from ductline import views

NEW_YEAR_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
# Sync steps: `drive` runs them in this process.
timed = Pipeline("show_timed").start(rt_app.add_one).chain(to=rt_app.double).chain(to=rt_app.add_one, name="again")


def show(db_url: str, run_id: str, *flags: str) -> str:
    # Wide enough for the full tables (whole ids, ISO times); tests/cli has the narrow ones.
    done = ductline_in_process("show", run_id, *flags, "--database", db_url, env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def rows(text: str) -> list[list[str]]:
    """The cells of every table row printed."""
    return [[cell.strip() for cell in line.strip().strip("│┃").split("│")] for line in text.splitlines()
            if line.count("│") >= 2]


def set_attempt(store, run_id: str, step: str, assignments: str) -> None:
    with store.dialect.transaction() as s:
        getattr(s, "_conn").execute(
            f"UPDATE ductline_attempts SET {assignments} "
            f"WHERE job_id IN (SELECT id FROM ductline_jobs WHERE run_id = '{run_id}' AND step = '{step}')")


def test_show_prints_each_attempts_start_end_and_duration(store, db_url):
    handle = timed.trigger(1, database=store)
    drive(store, timed)
    # Known timings, so the printed ones can be checked to the millisecond.
    set_attempt(store, handle.id, "add_one", f"started_ms = {NEW_YEAR_MS}, finished_ms = {NEW_YEAR_MS + 1_234}")
    set_attempt(store, handle.id, "double", f"started_ms = {NEW_YEAR_MS + 2_000}, finished_ms = "
                f"{NEW_YEAR_MS + 63_500}, result = 'errored', error_type = 'ConnectionError', error = 'flaky'")

    printed = rows(show(db_url, handle.id))
    assert ["add_one", "", "1", "succeeded", "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.234Z",
            "1.234 s", ""] in printed, printed
    assert ["double", "", "1", "errored", "2026-01-01T00:00:02.000Z", "2026-01-01T00:01:03.500Z",
            "1 min 1.500 s", "ConnectionError: flaky"] in printed, printed
    view = json.loads(show(db_url, handle.id, "--json"))
    again = view["steps"][2]["attempts"][0]
    assert [s["attempts"][0]["duration_ms"] for s in view["steps"][:2]] == [1_234, 61_500]
    assert ["again", "", "1", "succeeded", again["started_at"], again["finished_at"],
            views.duration_text(again["duration_ms"]), ""] in printed, printed


def test_show_prints_a_running_attempt_without_an_end(store, db_url):
    handle = timed.trigger(2, database=store)
    assert len(store.claim("w", [timed.name], 1, 60_000)) == 1
    view = json.loads(show(db_url, handle.id, "--json"))
    attempt = view["steps"][0]["attempts"][0]
    assert (attempt["result"], attempt["finished_at"], attempt["duration_ms"]) == (None, None, None)
    assert ["add_one", "", "1", "running", attempt["started_at"], "", "running", ""] in rows(show(db_url, handle.id))


def test_duration_text():
    assert [views.duration_text(ms) for ms in (None, 0, 999, 60_000, 3_723_004, 3_600_000)] == [
        "running", "0.000 s", "0.999 s", "1 min 0.000 s", "1 h 2 min 3.004 s", "1 h 0 min 0.000 s"]


def fails_then_recovers(x):
    return x


def joined(pair):
    return pair


# A branch that halts the run while its sibling waits out a delay: the sibling is held.
branches = (Pipeline("show_held").start(rt_app.add_one)
            .divide(to=[fails_then_recovers, rt_app.double], max_retry=1, retry_delay=0).combine(into=joined))


def ductline(db_url: str, *words: str) -> None:
    done = ductline_in_process(*words, "--database", db_url)
    assert done.returncode == 0, done.stderr


def test_show_json_gives_held_steps_and_a_revived_run_loses_its_halt(store, db_url):
    from ductline import codec
    from ductline.model.outcomes import AttemptResult, Ended
    from ductline.engine import record

    handle = branches.trigger(1, database=store)
    (first,) = store.claim("w", [branches.name], 1, 60_000)
    with store.transaction() as tx:
        record.success(tx, branches.definition(), record.Attempt(
            first.job_id, first.run_id, first.step, first.scope, first.attempt, first.lease_token), codec.dumps(2), 0)
    with store.dialect.transaction() as s:  # `double` waits an hour: only the other branch is ready
        getattr(s, "_conn").execute("UPDATE ductline_jobs SET not_before_ms = not_before_ms + 3600000 "
                                    f"WHERE run_id = '{handle.id}' AND step = 'double'")
    (failing,) = store.claim("w", [branches.name], 10, 60_000)
    assert failing.step == "fails_then_recovers"
    with store.transaction() as tx:
        record.failure(tx, branches.definition(), record.Attempt(
            failing.job_id, failing.run_id, failing.step, failing.scope, failing.attempt, failing.lease_token),
            Ended(AttemptResult.ERRORED, "ValueError", "down"), "Traceback")

    halted = json.loads(show(db_url, handle.id, "--json"))
    statuses = {s["step"]: s["status"] for s in halted["steps"]}
    assert statuses == {"add_one": "completed", "fails_then_recovers": "failed", "double": "held"}
    assert halted["status"] == "halted" and halted["halt_reason"] == "job_retries_exhausted"
    assert halted["metadata"]["halted_step"] == "fails_then_recovers"
    held = next(s for s in halted["steps"] if s["step"] == "double")
    assert held["not_before"] is not None  # a held job keeps the time it waits for

    ductline(db_url, "retry", handle.id)
    with store.dialect.transaction() as s:
        getattr(s, "_conn").execute(f"UPDATE ductline_jobs SET not_before_ms = 0 WHERE run_id = '{handle.id}'")
    assert sorted(drive(store, branches)) == ["double", "fails_then_recovers", "joined"]
    done = json.loads(show(db_url, handle.id, "--json"))
    assert done["status"] == "completed" and done["halt_reason"] is None
    assert not {"halted_step", "error", "reasons"} & set(done["metadata"]), done["metadata"]
    assert done["output"] == [2, 4]


def test_show_json_gives_each_skipped_steps_root(store, db_url):
    handle = branches.trigger(1, database=store)
    from ductline.operations.cancel import cancel_run

    drive(store, branches, skip=("fails_then_recovers", "double"))  # both branches claimed, neither done
    cancel_run(store, handle.id)  # this process defines the pipeline: its dependents are walked
    view = json.loads(show(db_url, handle.id, "--json"))
    assert view["status"] == "cancelled"
    stopped = {s["step"]: (s["status"], s["skip_root"]) for s in view["steps"]}
    # The combine was never created: it is recorded skipped, reached from the first
    # branch the walk met (both branches were cancelled while running).
    assert stopped["add_one"] == ("completed", None)
    assert stopped["fails_then_recovers"] == stopped["double"] == ("cancelled", None)
    assert stopped["joined"][0] == "skipped" and stopped["joined"][1] in {"fails_then_recovers", "double"}


def test_show_prints_a_completed_runs_output_on_one_line_cut_at_its_limit(store, db_url):
    from ductline.show_command import SHOW_OUTPUT_CHARS

    small = timed.trigger(1, database=store)
    drive(store, timed)
    assert "output: 5\n" in show(db_url, small.id)  # ((1 + 1) * 2) + 1
    big = Pipeline("show_big").start(rt_app.make_list)  # a list of n numbers
    handle = big.trigger(400, database=store)
    drive(store, big)
    [line] = [x for x in show(db_url, handle.id).splitlines() if x.startswith("output: ")]
    assert line.startswith("output: [0, 1, 2") and line.endswith("…")
    assert len(line) == len("output: ") + SHOW_OUTPUT_CHARS
