"""Store contract: the statements that filter or decide by a set of states act as
the rulebook says (`ductline.model.states`), for every status, on both backends.

The sets reach the SQL rendered from the rulebook (`ductline.store.queries`); these
tests hold each statement to its set by behaviour, so a statement that spells a set
out, or tests another one, fails here."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from contract_support import claim_one, create_run, make_job, new_id
from ductline.model import states
from ductline.model.states import JobStatus, RunStatus
from ductline.store import Store
from ductline.store.records import AUTO_STATUS


def set_status(store: Store, table: str, ids: Iterable[str], status: str, extra: str = "") -> None:
    """Put rows of ``table`` in a status no verb of the store would move them to
    directly (ids are the tests' own hex ids, statuses the enums' values)."""
    listed = ", ".join(f"'{i}'" for i in ids)
    store.dialect.run_script(f"UPDATE {table} SET status = '{status}'{extra} WHERE id IN ({listed});")


def runs_by_status(store: Store) -> dict[RunStatus, tuple[str, str, str]]:
    """One run per run status, each with one claimed job: ``{status: (run_id, job_id, lease_token)}``."""
    made = {}
    for status in RunStatus:
        run_id, _ = create_run(store)
        claimed = claim_one(store)
        assert claimed.run_id == run_id
        set_status(store, "ductline_runs", [run_id], status.value, ", deadline_ms = 0")
        made[status] = (run_id, claimed.job_id, claimed.lease_token)
    return made


@pytest.mark.parametrize("run_status", list(RunStatus))
def test_a_job_created_or_requeued_waits_as_waiting_status_says(store: Store, run_status: RunStatus) -> None:
    """insert_job, insert_jobs, retry_job and release_job: pending while the run is
    active, held once it halted (or ended)."""
    run_id, _ = create_run(store, {"step": "retried"}, {"step": "released"})
    first, second = claim_one(store), claim_one(store)
    retried, released = (first, second) if first.step == "retried" else (second, first)
    set_status(store, "ductline_runs", [run_id], run_status.value)
    with store.transaction() as tx:
        tx.insert_jobs([make_job(run_id, step="one", status=AUTO_STATUS)])
        tx.insert_jobs([make_job(run_id, step="many", scope=str(i), status=AUTO_STATUS) for i in range(2)])
        assert tx.retry_job(retried.job_id, retried.lease_token, 0)
        assert tx.release_job(released.job_id, released.lease_token)
    expected = states.waiting_status(run_status).value
    assert {j["step"]: j["status"] for j in store.run_jobs(run_id)} == {
        "retried": expected, "released": expected, "one": expected, "many": expected}


def test_run_filters_follow_the_rulebook_s_sets(store: Store) -> None:
    made = runs_by_status(store)
    mine = {run_id for run_id, _, _ in made.values()}

    def statuses(run_ids: Iterable[str]) -> set[RunStatus]:
        by_id = {run_id: status for status, (run_id, _, _) in made.items()}
        return {by_id[r] for r in run_ids if r in mine}

    # a deadline is due in a run that is not finished (a halted one too)
    assert statuses(r["id"] for r in store.due_deadlines(limit=1000)) == states.UNFINISHED_RUN
    # a lease is held, and a success recorded, only while its run is not finished
    tokens = {token: status for status, (_, _, token) in made.items()}
    assert {tokens[t] for t in store.leases_held(list(tokens))} == states.UNFINISHED_RUN
    held = store.confirm_leases([(job_id, token) for _, job_id, token in made.values()])
    assert {tokens[t] for t in held} == states.UNFINISHED_RUN
    # a run ended by a stop with a job still open is an orphan for maintenance
    assert statuses(r["run_id"] for r in store.orphaned_runs(limit=1000)) == states.STOPPED_RUN
    completed = set()
    for status, (_, job_id, token) in made.items():
        with store.transaction() as tx:
            if tx.complete_job(job_id, token, "1"):
                completed.add(status)
    assert completed == states.UNFINISHED_RUN


def test_halting_and_pausing_follow_the_rulebook_s_sets(store: Store) -> None:
    made = runs_by_status(store)
    halted = set()
    for status, (run_id, _, _) in made.items():
        with store.transaction() as tx:
            if tx.halt_run(run_id, "job_retries_exhausted", {}):
                halted.add(status)
    assert halted == states.ACTIVE_RUN

    made = runs_by_status(store)
    paused = set()
    for status, (run_id, _, _) in made.items():
        job = make_job(run_id, step="gate", status=JobStatus.PAUSED.value)
        with store.transaction() as tx:
            tx.insert_jobs([job])
            tx.pause_jobs([(job.id, run_id, None)])
        if store.get_run(run_id)["status"] == RunStatus.PAUSED and status is not RunStatus.PAUSED:
            paused.add(status)
    assert paused == states.PAUSABLE_RUN


def jobs_by_status(store: Store) -> tuple[str, dict[str, JobStatus]]:
    """A run holding one job of every job status: ``(run_id, {job_id: status})``."""
    run_id, _ = create_run(store, *({"step": s.value, "job_id": new_id()} for s in JobStatus))
    made = {j["id"]: JobStatus(j["step"]) for j in store.run_jobs(run_id)}
    for job_id, status in made.items():
        set_status(store, "ductline_jobs", [job_id], status.value)
    return run_id, made


def test_job_filters_follow_the_rulebook_s_sets(store: Store) -> None:
    run_id, made = jobs_by_status(store)
    with store.transaction() as tx:
        assert {made[j["id"]] for j in tx.open_jobs(run_id)} == states.OPEN_JOB
        tx.skip_waiting(run_id, "cancelled", None)
    after = {j["id"]: j["status"] for j in store.run_jobs(run_id)}
    assert {made[j] for j, s in after.items() if s != made[j]} == states.IDLE_JOB
    assert all(after[j] == JobStatus.SKIPPED for j, s in made.items() if s in states.IDLE_JOB)

    # an operator's retry of a halted run makes exactly the revivable jobs pending
    run_id, made = jobs_by_status(store)
    set_status(store, "ductline_runs", [run_id], RunStatus.HALTED.value)
    assert store.revive_run(run_id)
    after = {j["id"]: j["status"] for j in store.run_jobs(run_id)}
    assert {made[j] for j, s in after.items() if s != made[j]} == states.REVIVABLE_JOB
    assert all(after[j] == JobStatus.PENDING for j, s in made.items() if s in states.REVIVABLE_JOB)


@pytest.mark.parametrize("job_status", list(JobStatus))
def test_an_orphan_is_a_stopped_run_with_an_open_job(store: Store, job_status: JobStatus) -> None:
    run_id, (job_id,) = create_run(store)
    set_status(store, "ductline_jobs", [job_id], job_status.value)
    set_status(store, "ductline_runs", [run_id], RunStatus.CANCELLED.value)
    orphaned = run_id in {r["run_id"] for r in store.orphaned_runs(limit=1000)}
    assert orphaned is (job_status in states.OPEN_JOB)
