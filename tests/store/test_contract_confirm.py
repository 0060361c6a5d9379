"""Store contract: a worker's confirmation of the leases of held jobs whose time came
(`Store.confirm_leases`), on both backends. It answers as a renewal would, extends
nothing, and never answers from before a stop of the run that is still open: a
stop that judged a held job not begun (`ductline.model.stops.begun_by`) must find
it never started."""

from __future__ import annotations

import threading

import psycopg
import pytest

from contract_support import claim_one, create_run, wait_for
from ductline.engine import stop
from ductline.errors import StoreUnavailable
from ductline.store import Store, open_store

CONFIRMING = "ductline-confirming"  # the application name of the confirming connection


def test_a_confirmation_answers_as_a_renewal_and_extends_nothing(store: Store) -> None:
    for _ in range(3):
        create_run(store)
    kept, cancelled, other = (claim_one(store) for _ in range(3))
    before = store.lease_state(kept.job_id)
    assert store.confirm_leases([(kept.job_id, kept.lease_token), (other.job_id, other.lease_token)]) == {
        kept.lease_token, other.lease_token}
    assert store.lease_state(kept.job_id) == before
    # A lease token is asked after with its own job only.
    assert store.confirm_leases([(kept.job_id, other.lease_token)]) == set()
    with store.transaction() as tx:
        stop.cancel(tx, None, cancelled.run_id)
    leases = [(j.job_id, j.lease_token) for j in (kept, cancelled)]
    assert store.confirm_leases(leases) == {kept.lease_token}
    assert store.renew_leases("another-worker", [kept.lease_token, cancelled.lease_token], 60_000)[1] == {
        kept.lease_token}
    assert store.confirm_leases([]) == set()


def test_a_confirmation_waits_for_a_stop_still_open(store: Store, db_url: str, backend: str) -> None:
    create_run(store)
    claimed = claim_one(store)
    lease = [(claimed.job_id, claimed.lease_token)]
    # SQLite: with no time to wait for the write lock, a confirmation fails where it
    # would wait; PostgreSQL: the confirming connection is found waiting by its name.
    confirming = open_store(db_url, busy_timeout=0) if backend == "sqlite" else \
        open_store(db_url, application_name=CONFIRMING)
    answers: list[set[str]] = []
    thread = threading.Thread(target=lambda: answers.append(confirming.confirm_leases(lease)), daemon=True)
    try:
        with store.transaction() as tx:
            stop.cancel(tx, None, claimed.run_id)
            if backend == "sqlite":
                # It needs the write lock the stop holds, rather than read the lease
                # as it was before the stop.
                with pytest.raises(StoreUnavailable):
                    confirming.confirm_leases(lease)
            else:
                thread.start()
                wait_for(lambda: _waits_for_a_lock(db_url, CONFIRMING), timeout=30)
        if backend != "sqlite":
            thread.join(30)
            assert answers == [set()]  # read after the stop's commit: the lease is gone
        assert confirming.confirm_leases(lease) == set()
    finally:
        confirming.close()


def _waits_for_a_lock(db_url: str, application_name: str) -> bool:
    """A connection named ``application_name`` to this test's database waits for a
    lock (PostgreSQL)."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                           "AND datname = current_database() AND wait_event_type = 'Lock'",
                           (application_name,)).fetchone()
    return row is not None and row[0] > 0


def test_a_confirmation_leaves_its_connection_s_commits_durable(db_url: str, backend: str) -> None:
    """PostgreSQL: the confirmation's own commit does not wait for the disk; the
    pooled connection's next transactions do."""
    if backend == "sqlite":
        pytest.skip("PostgreSQL's commit setting")
    # The test databases default to synchronous_commit off (tests/conftest.py): this
    # store's sessions start with the server's default, on, which the confirmation must
    # leave as it found it.
    store = open_store(f"{db_url}?options=-c%20synchronous_commit%3Don", max_connections=1)
    try:
        create_run(store)
        claimed = claim_one(store)
        assert store.confirm_leases([(claimed.job_id, claimed.lease_token)]) == {claimed.lease_token}
        with store.dialect.reader() as session:  # the pool's one connection
            row = session._conn.execute("SHOW synchronous_commit").fetchone()  # type: ignore[attr-defined]
        assert row is not None and row["synchronous_commit"] == "on"
    finally:
        store.close()
