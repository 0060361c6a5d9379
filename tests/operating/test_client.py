"""The client: attach to a run by id, wait for it (notified on PostgreSQL, polled on
SQLite), its result or a clear error for a run that did not complete, and the async
variants. Real workers on both backends: the tests that look only at their own runs
share one per backend (`shared_worker`); the one that starts its worker after its wait
began starts its own."""

from __future__ import annotations

import asyncio
import threading

import pytest
import rt_app
from helpers import wait_for

from ductline import RunFailed, RunHandle, RunNotFound


class CountingHandle(RunHandle):
    """Counts how often the wait looked at the run."""

    looks = 0

    def status(self) -> str:
        self.looks += 1
        return super().status()


def test_attach_wait_and_result_of_a_completed_run(shared_store, shared_backend_url, shared_worker):
    handle = rt_app.chain.trigger(1, database=shared_store)
    attached = RunHandle.attach(handle.id, database=shared_backend_url)
    assert attached.id == handle.id and not attached.created
    assert attached.result(60) == 16  # (1 + 1) * 2, squared
    assert attached.error is None and attached.halt_reason is None


def test_attach_refuses_a_missing_run_and_a_bad_id(store):
    with pytest.raises(RunNotFound):
        RunHandle.attach("0" * 32, database=store)
    with pytest.raises(TypeError):
        RunHandle.attach(42, database=store)  # type: ignore[arg-type]


def test_result_raises_for_a_halted_and_a_cancelled_run(shared_store, shared_worker):
    halted = rt_app.failing.trigger(1, database=shared_store)
    with pytest.raises(RunFailed) as failed:
        halted.result(60)
    assert failed.value.status == "halted" and failed.value.halt_reason == "job_retries_exhausted"
    assert "always_fails" in failed.value.error and halted.halt_reason == "job_retries_exhausted"
    stuck = rt_app.cancellable.trigger(1, database=shared_store)
    wait_for(lambda: stuck.status() == "running", 30)
    stuck.cancel()
    with pytest.raises(RunFailed, match="cancelled") as cancelled:
        stuck.result(30)
    assert cancelled.value.status == "cancelled" and stuck.error == "the run was cancelled"


def test_a_wait_times_out_with_the_status_it_saw(store):
    handle = rt_app.chain.trigger(1, database=store, delay=3600)
    with pytest.raises(TimeoutError, match="still pending"):
        handle.wait(0.2)


def test_on_postgresql_a_wait_is_woken_by_a_notification_not_by_polling(store, backend, workers, monkeypatch):
    import ductline.handle

    # Without a notification a PostgreSQL wait would look again only after an hour.
    monkeypatch.setattr(ductline.handle, "_NOTIFIED_RECHECK", 3600.0)
    handle = CountingHandle(rt_app.slow_chain.trigger(1, database=store).id, store)
    done = threading.Event()
    threading.Thread(target=lambda: (handle.wait(120), done.set()), daemon=True).start()
    wait_for(lambda: handle.looks >= 1, 10)
    workers()
    assert done.wait(60), "the wait was not woken"
    if backend == "postgres":
        assert handle.looks == 2  # once before waiting, once when notified
    else:
        assert handle.looks >= 2  # SQLite polls


def test_async_trigger_and_result(shared_store, shared_worker):
    async def main() -> object:
        handle = await rt_app.chain.trigger_async(2, database=shared_store)
        return await handle.result_async(60)

    assert asyncio.run(main()) == 36  # (2 + 1) * 2, squared
