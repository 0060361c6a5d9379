"""Store contract: a batch of jobs inserted by one statement (`Tx.insert_jobs`, which
sends the values every row shares once) gives the rows that inserting each job alone
gives, on both backends, whichever fields the rows share."""

from __future__ import annotations

from typing import Any

from contract_support import make_job, make_run, new_id
from ductline.store import Store
from ductline.store.records import AUTO_STATUS, NewJob
from ductline.store.tx import shared_fields

COMPARED = ("step", "scope", "parent_scope", "elem_index", "status", "priority", "limit_key", "queue", "definition")


def _batch(run_id: str) -> list[NewJob]:
    """Jobs that share some fields and differ in others, a value beside a null too."""
    plain = [make_job(run_id, step="each", scope=f"0/{i}", parent_scope="0", elem_index=i, status=AUTO_STATUS,
                      input=f"[{i}]") for i in range(3)]
    return plain + [
        make_job(run_id, step="each", scope="0/3", parent_scope="0", elem_index=3, status="paused", input="[3]",
                 timeout_seconds=30, priority=2, not_before_ms=1234),
        make_job(run_id, step="other", scope="", status=AUTO_STATUS, delay_ms=60_000, max_retry=0),
    ]


def _with_limit(job: NewJob, key: str | None) -> NewJob:
    fields: dict[str, Any] = {name: getattr(job, name) for name in job.__slots__}  # type: ignore[attr-defined]
    return NewJob(**{**fields, "limit_key": key, "id": new_id()})


def _rows(store: Store, run_id: str) -> dict[tuple[str, str], dict[str, Any]]:
    rows = {}
    for row in store.run_jobs(run_id):
        kept = {name: row[name] for name in COMPARED}
        kept["delay"] = None if row["not_before_ms"] == 1234 else row["not_before_ms"] - row["created_ms"] >= 60_000
        rows[(row["step"], row["scope"])] = kept
    return rows


def test_a_batch_gives_the_rows_of_its_jobs_inserted_one_by_one(store: Store) -> None:
    together, alone = make_run(), make_run()
    with store.transaction() as tx:
        tx.insert_run(together)
        tx.insert_run(alone)
        batch = _batch(together.id)
        batch[1] = _with_limit(batch[1], "contract:each")
        tx.insert_jobs(batch)
        for job in _batch(alone.id):
            tx.insert_jobs([_with_limit(job, "contract:each") if job.scope == "0/1" else job])
    got, expected = _rows(store, together.id), _rows(store, alone.id)
    assert len(got) == 5 and got == expected


def test_a_batch_of_one_step_s_elements_keeps_the_first_of_two_rows_for_one_step_run(store: Store) -> None:
    run = make_run()
    with store.transaction() as tx:
        tx.insert_run(run)
        elements = [make_job(run.id, step="each", scope=str(i), parent_scope="", elem_index=i, status=AUTO_STATUS,
                             input=f"[{i}]") for i in range(4)]
        tx.insert_jobs(elements + [make_job(run.id, step="each", scope="2", parent_scope="", elem_index=2,
                                            status=AUTO_STATUS, input='["second"]')])
    rows = store.run_jobs(run.id)
    assert sorted((r["scope"], r["id"], r["status"], r["elem_index"]) for r in rows) == [
        (str(i), elements[i].id, "pending", i) for i in range(4)]


def test_shared_fields_sends_what_every_row_shares_once() -> None:
    rows = [{"a": 1, "b": None, "c": "x"}, {"a": 1, "b": 2, "c": "x"}, {"a": 1, "b": None, "c": "y"}]
    assert shared_fields(rows) == ({"a": 1}, [{"b": None, "c": "x"}, {"b": 2, "c": "x"}, {"b": None, "c": "y"}])
    assert shared_fields(rows[:1]) == (rows[0], [{}])
    different = [{"a": 1}, {"a": 2}]
    assert shared_fields(different) == ({}, different)
