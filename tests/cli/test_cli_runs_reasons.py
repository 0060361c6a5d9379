"""``ductline runs`` says why a run stopped and when it ended, on both backends, by the
command line's entry point: a halted run shows its halt reason and no end (it has not ended:
``retry`` revives it); a failed run (its deadline passed) shows the error it recorded
as its reason, in the table and in ``--json``."""

from __future__ import annotations

import json

import cli_app
import pytest
from helpers import ductline_in_process

from ductline import codec
from ductline.engine import record, stop
from ductline.model.outcomes import AttemptResult, Ended


def ductline(db_url: str, *words: str, columns: str = "200") -> str:
    """The command's standard output, run by the command line's entry point in this
    process (`helpers.ductline_in_process`)."""
    done = ductline_in_process(*words, "--database", db_url, env={"COLUMNS": columns})
    assert done.returncode == 0, done.stderr
    return done.stdout


def halted_run(store) -> str:
    """A run of ``gives_up_pipeline`` whose second step fails every attempt: it halts."""
    pipeline = cli_app.gives_up_pipeline
    definition = pipeline.definition()
    handle = pipeline.trigger(1, database=store)
    while store.get_run(handle.id)["status"] != "halted":
        (job,) = store.claim("test-driver", [pipeline.name], 1, 60_000)
        attempt = record.Attempt(job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token)
        with store.transaction() as tx:
            if job.step == "add_one":
                record.success(tx, definition, attempt, codec.dumps(2), 0)
            else:
                record.failure(tx, definition, attempt, Ended(AttemptResult.ERRORED, "RuntimeError", "no"), "")
    return handle.id


def failed_run(store) -> str:
    """A run of ``chain`` with a 2 s deadline, ended by the deadline rule before it ran."""
    handle = cli_app.chain.trigger(1, database=store, timeout=2)
    with store.transaction() as tx:
        assert stop.expire(tx, cli_app.chain.definition(), handle.id)
    return handle.id


def test_runs_json_gives_why_each_run_stopped_and_no_end_for_a_halted_one(store, db_url):
    halted, failed = halted_run(store), failed_run(store)
    runs = {r["run_id"]: r for r in json.loads(ductline(db_url, "runs", "--json"))}
    assert runs[halted]["status"] == "halted"
    assert (runs[halted]["halt_reason"], runs[halted]["reason"]) == ("job_retries_exhausted", "job_retries_exhausted")
    assert runs[halted]["finished_at"] is None
    error = store.get_run(failed)["metadata"]
    assert "deadline of 2 s" in error
    assert runs[failed]["status"] == "failed" and runs[failed]["halt_reason"] is None
    assert runs[failed]["reason"] == json.loads(error)["error"]
    assert runs[failed]["finished_at"] is not None


def test_runs_table_gives_a_failed_runs_reason_and_no_end_for_a_halted_run(store, db_url):
    halted, failed = halted_run(store), failed_run(store)
    reason = json.loads(store.get_run(failed)["metadata"])["error"]

    def row(text: str, run_id: str) -> list[str]:
        line = next(line for line in text.splitlines() if run_id in line)
        return [c.strip() for c in line.strip()[1:-1].split("│")]

    full = ductline(db_url, "runs", columns="400")  # the full table: whole ids, ISO times
    assert [c.strip() for c in full.splitlines()[1].strip()[1:-1].split("┃")] == [
        "run", "pipeline", "status", "reason", "created", "finished"], full
    assert row(full, failed)[2:4] == ["failed", reason] and row(full, failed)[5], full
    assert row(full, halted)[2:4] == ["halted", "job_retries_exhausted"] and row(full, halted)[5] == "", full

    compact = ductline(db_url, "runs", columns="80")  # short ids, and how long a run took
    lines = compact.splitlines()
    failed_at = next(i for i, line in enumerate(lines) if line.startswith(failed[:8]))
    assert "failed  the run exceeded its deadline" in lines[failed_at], compact
    # it failed before it started (the deadline rule ran it out by hand): no time it took
    assert lines[failed_at].split()[-1] != "s", compact
    reason_cell = lines[failed_at].split("failed", 1)[1].rsplit(None, 1)[0].split()
    assert " ".join(reason_cell + lines[failed_at + 1].split()) == reason, compact  # wrapped, whole
    halted_line = next(line for line in lines if line.startswith(halted[:8])).rstrip()
    # the last cell is when it was created: no time it took, it has not ended
    assert halted_line.split()[-2:] == ["job_retries_exhausted", halted_line.split()[-1]], compact
    assert not halted_line.endswith(" s"), compact


def halt_with(store, error_type: str) -> str:
    """A run of ``chain`` whose first attempt fails with ``error_type``; returns its id."""
    handle = cli_app.chain.trigger(1, database=store)
    (job,) = store.claim("test-driver", [cli_app.chain.name], 1, 60_000)
    with store.transaction() as tx:
        record.failure(tx, cli_app.chain.definition(),
                       record.Attempt(job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token),
                       Ended(AttemptResult.ERRORED, error_type, "the output holds a set"), "")
    return handle.id


@pytest.mark.parametrize("error_type", ["ductline.PayloadNotSerializable", "ductline.ExpandNotAList"])
def test_show_says_to_change_the_code_before_retrying_an_error_that_is_not_retried(store, db_url, error_type):
    run_id = halt_with(store, error_type)
    assert store.get_run(run_id)["halt_reason"] == "non_retryable_error"
    said = " ".join(ductline(db_url, "show", run_id).split())
    assert (f"halted: its step's error is not retried, and the same input fails the same way: change the "
            f"step's code (and restart the workers with it), then `ductline retry {run_id[:8]}` revives the run"
            ) in said, said


def test_show_says_a_retry_revives_a_run_halted_by_retries_exhausted(store, db_url):
    run_id = halted_run(store)
    said = " ".join(ductline(db_url, "show", run_id).split())
    assert f"halted: `ductline retry {run_id[:8]}` revives it from its failed step(s)" in said, said
    assert "change the step's code" not in said
