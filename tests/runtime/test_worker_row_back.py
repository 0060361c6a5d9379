"""A worker whose row retention deleted (it could not heartbeat for longer than lost
workers are kept) registers again at its next heartbeat, instead of running unseen
by ``ductline workers``, the dashboard and the rule that says who serves a queue."""

from __future__ import annotations

import rt_app
from helpers import start_worker, stop_worker, wait_for

from ductline.store import Store


def rows(store: Store) -> list[dict[str, object]]:
    return list(store.list_workers(10, None))


def test_a_worker_whose_row_was_deleted_registers_again(store: Store, db_url: str) -> None:
    worker = start_worker(db_url, concurrency=1)
    try:
        wait_for(lambda: len(rows(store)) == 1, timeout=120)
        [first] = rows(store)
        with store.dialect.transaction() as s:  # what prune does past the lost workers' cutoff
            s.execute("prune_workers", {"stopped_before": 2**62, "lost_before": 2**62, "limit": 100})
        assert rows(store) == []
        # Back within a heartbeat (a third of the 3 s lease), with what it registered first.
        wait_for(lambda: len(rows(store)) == 1, timeout=60)
        [again] = rows(store)
        assert (again["id"], again["pid"], again["queues"], again["concurrency"]) == \
            (first["id"], first["pid"], first["queues"], first["concurrency"])
        assert rt_app.chain.trigger(1, database=store).wait(60) == "completed"
    finally:
        stop_worker(worker)
