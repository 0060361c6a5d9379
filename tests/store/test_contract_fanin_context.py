"""Store contract: fan-in counters, gathering outputs, run context, the wake-up timer."""

from __future__ import annotations

import threading

import pytest

from contract_support import LONG_LEASE_MS, PIPELINE, WORKER, claim_one, create_run, run_threads
from ductline.codec import safe_text
from ductline.errors import LeaseLost
from ductline.store import Store, open_store
from ductline.store.store import Tx


def arrive_in(tx: Tx, run_id: str, step: str, scope: str, expected: int) -> bool:
    """One arrival; whether it completed the fan-in."""
    return (run_id, step, scope) in tx.arrive_fanins([(run_id, step, scope, expected, 1)])


def arrive(store: Store, run_id: str, step: str, scope: str, expected: int) -> bool:
    with store.transaction() as tx:
        return arrive_in(tx, run_id, step, scope, expected)


def test_fanin_created_at_expand_fires_on_the_last_arrival_only(store: Store) -> None:
    run_id, _ = create_run(store)
    with store.transaction() as tx:
        tx.create_fanin(run_id, "collapse", "0", 3)
    assert arrive(store, run_id, "collapse", "0", -1) is False
    with store.transaction() as tx:  # creating it again does not reset the count
        tx.create_fanin(run_id, "collapse", "0", 3)
    assert arrive(store, run_id, "collapse", "0", -1) is False
    assert arrive(store, run_id, "collapse", "0", -1) is True
    assert arrive(store, run_id, "collapse", "0", -1) is False, "a fan-in fires once"


def test_fanin_of_a_combine_is_created_by_the_first_arrival(store: Store) -> None:
    run_id, _ = create_run(store)
    assert [arrive(store, run_id, "combine", "", 3) for _ in range(4)] == [False, False, True, False]


def test_a_single_branch_fanin_fires_on_its_first_arrival(store: Store) -> None:
    run_id, _ = create_run(store)
    assert arrive(store, run_id, "combine", "", 1) is True


def test_a_batch_counts_all_its_arrivals_and_names_the_fanins_it_completed(store: Store) -> None:
    """One statement for a recording batch's arrivals: ``n`` per fan-in; a fan-in is
    named in the result by the batch whose count reaches its expected number."""
    run_a, _ = create_run(store)
    run_b, _ = create_run(store)
    with store.transaction() as tx:
        tx.create_fanin(run_a, "collapse", "0", 5)
    with store.transaction() as tx:
        assert tx.arrive_fanins([(run_a, "collapse", "0", -1, 3), (run_b, "join", "", 2, 1)]) == set()
    with store.transaction() as tx:
        assert tx.arrive_fanins([(run_b, "join", "", 2, 1), (run_a, "collapse", "0", -1, 2),
                                 (run_a, "combine", "", 4, 4)]) == \
            {(run_a, "collapse", "0"), (run_b, "join", ""), (run_a, "combine", "")}
    with store.transaction() as tx:
        assert tx.arrive_fanins([(run_a, "collapse", "0", -1, 1)]) == set(), "a fan-in completes once"
        assert tx.arrive_fanins([]) == set()


def test_fanins_are_counted_per_run_step_and_scope(store: Store) -> None:
    run_a, _ = create_run(store)
    run_b, _ = create_run(store)
    assert arrive(store, run_a, "join", "", 2) is False
    assert arrive(store, run_b, "join", "", 2) is False
    assert arrive(store, run_a, "other", "", 2) is False
    assert arrive(store, run_a, "join", "1", 2) is False
    assert arrive(store, run_a, "join", "", 2) is True
    assert arrive(store, run_b, "join", "", 2) is True


def test_an_arrival_rolled_back_does_not_count(store: Store) -> None:
    run_id, _ = create_run(store)
    with pytest.raises(RuntimeError):
        with store.transaction() as tx:
            assert arrive_in(tx, run_id, "join", "", 2) is False
            raise RuntimeError("the completing transaction failed")
    assert arrive(store, run_id, "join", "", 2) is False
    assert arrive(store, run_id, "join", "", 2) is True


@pytest.mark.parametrize("kind", ["collapse", "combine"])
def test_concurrent_arrivals_fire_exactly_once_and_the_last_sees_every_output(
        backend: str, db_url: str, store: Store, kind: str) -> None:
    """Eight branches finish at the same moment, each in its own transaction on its own
    connection; exactly one of them completes the fan-in, and it gathers all eight."""
    n = 8
    if kind == "collapse":
        specs = [{"step": "elem", "scope": f"0.{i}", "parent_scope": "0", "elem_index": i} for i in range(n)]
    else:
        specs = [{"step": f"branch{i}", "scope": "0"} for i in range(n)]
    run_id, job_ids = create_run(store, *specs)
    if kind == "collapse":
        with store.transaction() as tx:
            tx.create_fanin(run_id, "collapse", "0", n)
    tokens = {c.job_id: c.lease_token for c in store.claim(WORKER, [PIPELINE], n, LONG_LEASE_MS)}
    assert set(tokens) == set(job_ids)
    ready = threading.Barrier(n, timeout=20)

    def finish(i: int) -> tuple[bool, list[str] | dict[str, str] | None]:
        own = open_store(db_url)
        try:
            if backend == "sqlite":
                ready.wait()  # BEGIN IMMEDIATE serialises writers: meet before, not inside
            with own.transaction() as tx:
                assert tx.complete_job(job_ids[i], tokens[job_ids[i]], f'"out{i}"')
                if backend == "postgres":
                    ready.wait()  # all eight transactions are open and uncommitted here
                if kind == "collapse":
                    fired = arrive_in(tx, run_id, "collapse", "0", -1)
                    gathered: list[str] | dict[str, str] | None = \
                        tx.gather_elements(run_id, "elem", "0") if fired else None
                else:
                    fired = arrive_in(tx, run_id, "combine", "0", n)
                    gathered = tx.gather_branches(run_id, "0", [f"branch{k}" for k in range(n)]) \
                        if fired else None
            return fired, gathered
        finally:
            own.close()

    results = run_threads(n, finish, timeout=60)
    winners = [gathered for fired, gathered in results if fired]
    assert len(winners) == 1, f"fan-in fired {len(winners)} times"
    if kind == "collapse":
        assert winners[0] == [f'"out{i}"' for i in range(n)]
    else:
        assert winners[0] == {f"branch{i}": f'"out{i}"' for i in range(n)}
    assert arrive(store, run_id, kind, "0", -1 if kind == "collapse" else n) is False


def test_gather_elements_orders_by_element_index(store: Store) -> None:
    order = [3, 11, 0, 10, 2, 1, 9, 4, 8, 5, 7, 6]  # created out of order; 10 and 11 sort after 9
    specs = [{"step": "elem", "scope": f"0.{i}", "parent_scope": "0", "elem_index": i} for i in order]
    specs += [
        {"step": "elem", "scope": "1.0", "parent_scope": "1", "elem_index": 0},   # another parent scope
        {"step": "other", "scope": "0.0", "parent_scope": "0", "elem_index": 0},  # another step
        {"step": "elem", "scope": "0.12", "parent_scope": "0", "elem_index": 12, "delay_ms": 600_000},
    ]
    run_id, job_ids = create_run(store, *specs)
    claimed = store.claim(WORKER, [PIPELINE], 100, LONG_LEASE_MS)
    assert len(claimed) == len(specs) - 1
    index_of = {j: s.get("elem_index") for j, s in zip(job_ids, specs)}
    with store.transaction() as tx:
        for c in reversed(claimed):  # completed in yet another order
            assert tx.complete_job(c.job_id, c.lease_token, f'{{"i": {index_of[c.job_id]}, "s": "{c.scope}"}}')
    with store.transaction() as tx:
        outputs = tx.gather_elements(run_id, "elem", "0")
    assert outputs == [f'{{"i": {i}, "s": "0.{i}"}}' for i in range(12)], "the pending element is left out"


def test_gather_branches_returns_completed_outputs_by_step(store: Store) -> None:
    run_id, job_ids = create_run(
        store,
        {"step": "a", "scope": "0"}, {"step": "b", "scope": "0"}, {"step": "c", "scope": "0"},
        {"step": "a", "scope": "1"}, {"step": "d", "scope": "0"},
    )
    claims = {c.job_id: c for c in store.claim(WORKER, [PIPELINE], 10, LONG_LEASE_MS)}
    with store.transaction() as tx:
        for job_id, out in zip(job_ids, ['"A0"', '"B0"', None, '"A1"', '"D0"']):
            if out is not None:
                assert tx.complete_job(job_id, claims[job_id].lease_token, out)
    with store.transaction() as tx:
        branches = tx.gather_branches(run_id, "0", ["b", "a", "c"])
    assert branches == {"a": '"A0"', "b": '"B0"'}  # c is still running; d was not asked for


# -- run context ---------------------------------------------------------------------


def claimed(store: Store) -> tuple[str, dict[str, str]]:
    """A run whose one job this worker claimed: ``(run_id, lease)``, the keyword
    arguments a context write on behalf of its attempt passes."""
    run_id, _ = create_run(store)
    job = claim_one(store)
    assert job.run_id == run_id
    return run_id, {"job_id": job.job_id, "lease_token": job.lease_token}


def test_context_set_without_overwrite_keeps_the_first_value(store: Store) -> None:
    run_id, lease = claimed(store)
    assert store.context_get(run_id, "cursor") is None
    assert store.context_set(run_id, "cursor", '"first"', overwrite=False, **lease) is True
    assert store.context_set(run_id, "cursor", '"second"', overwrite=False, **lease) is False
    assert store.context_get(run_id, "cursor") == '"first"'


def test_context_set_with_overwrite_replaces(store: Store) -> None:
    run_id, lease = claimed(store)
    assert store.context_set(run_id, "k", "1", overwrite=True, **lease) is True
    assert store.context_set(run_id, "k", "2", overwrite=True, **lease) is True
    assert store.context_get(run_id, "k") == "2"
    assert store.context_set(run_id, "k", "3", overwrite=False, **lease) is False
    assert store.context_get(run_id, "k") == "2"


def test_context_is_per_run_and_key(store: Store) -> None:
    run_a, lease = claimed(store)
    run_b, _ = create_run(store)
    store.context_set(run_a, "k", '"a"', overwrite=False, **lease)
    assert store.context_get(run_b, "k") is None
    assert store.context_get(run_a, "K") is None
    assert store.context_get(run_a, "missing") is None


def test_a_context_write_without_the_lease_is_refused_and_stores_nothing(store: Store) -> None:
    run_id, lease = claimed(store)
    other_run, _ = create_run(store)
    assert store.context_set(run_id, "k", '"kept"', overwrite=False, **lease) is True
    for wrong in ({**lease, "lease_token": "not-the-token"}, {**lease, "job_id": "no-such-job"}):
        with pytest.raises(LeaseLost, match="lease was lost.*context value 'k' was not stored"):
            store.context_set(run_id, "k", '"late"', overwrite=True, **wrong)
    with pytest.raises(LeaseLost):  # a lease names its own run: no write into another
        store.context_set(other_run, "k", '"elsewhere"', overwrite=True, **lease)
    assert store.context_get(run_id, "k") == '"kept"' and store.context_get(other_run, "k") is None


# -- the wake-up timer -----------------------------------------------------------------


def test_next_not_before_is_the_earliest_pending_job_of_the_listed_pipelines(store: Store) -> None:
    assert store.next_not_before([PIPELINE]) is None
    now = store.now_ms()
    create_run(store, {"not_before_ms": now + 50_000}, {"not_before_ms": now + 30_000}, pipeline="p1")
    create_run(store, {"not_before_ms": now + 10_000}, pipeline="p2")
    assert store.next_not_before(["p1"]) == now + 30_000
    assert store.next_not_before(["p2", "p1"]) == now + 10_000
    assert store.next_not_before(["p3"]) is None
    assert store.next_not_before([]) is None


def test_next_not_before_ignores_jobs_that_are_not_pending(store: Store) -> None:
    now = store.now_ms()
    create_run(store, {"not_before_ms": now - 5_000}, {"not_before_ms": now + 90_000})
    create_run(store, {"not_before_ms": now + 1_000, "status": "held"})
    assert store.next_not_before([PIPELINE]) == now - 5_000, "a job that is ready already counts"
    store.claim(WORKER, [PIPELINE], 1, LONG_LEASE_MS)
    assert store.next_not_before([PIPELINE]) == now + 90_000


def test_insert_jobs_accepts_an_empty_list(store: Store) -> None:
    run_id, _ = create_run(store)
    with store.transaction() as tx:
        tx.insert_jobs([])
    assert len(store.run_jobs(run_id)) == 1


@pytest.mark.parametrize("key", ["k\x00", "k\ud800", "\udc80", ""])
def test_a_context_key_that_would_alias_another_is_refused_and_changes_nothing(store: Store, key: str) -> None:
    """Stored as text, a NUL or a lone surrogate is kept as its escape: ``"k\\ud800"``
    would name the row of the six characters ``k\\ud800`` and replace its value."""
    run_id, lease = claimed(store)
    escaped = safe_text(key) if key else "k"  # what the store would have made of it
    assert store.context_set(run_id, escaped, '"its own"', overwrite=False, **lease) is True
    with pytest.raises(TypeError, match="context keys"):
        store.context_set(run_id, key, '"another"', overwrite=True, **lease)
    with pytest.raises(TypeError, match="context keys"):
        store.context_get(run_id, key)
    assert store.context_get(run_id, escaped) == '"its own"'
