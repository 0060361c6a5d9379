"""``spare_children``: how many warm children a worker keeps besides its slots'."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from helpers import PATIENCE

from ductline.config import load_settings
from ductline.errors import ConfigurationError
from ductline.runtime.launch import build_worker

APP = str(Path(__file__).parent.parent / "apps" / "rt_app.py")


@pytest.mark.parametrize(("concurrency", "spares", "kept"), [(2, None, 2), (8, None, 4), (8, 0, 0), (8, 1, 1)])
def test_a_worker_keeps_at_most_one_spare_per_slot(store, concurrency, spares, kept):
    settings = load_settings(database_url=store.url, spare_children=spares)
    worker = build_worker(store, [APP], concurrency, settings)
    assert worker.spares.count == kept


def test_a_worker_without_spares_runs_its_jobs(store):
    import rt_app
    from helpers import start_worker, stop_worker

    worker = start_worker(store.url, env={"DUCTLINE_SPARE_CHILDREN": "0"})
    try:
        assert rt_app.slow_chain.trigger(3, database=store).wait(90) == "completed"
    finally:
        assert stop_worker(worker) == 0


def _started_since_boot(pid: int) -> float:
    """When process ``pid`` started, in seconds since boot (to a clock tick)."""
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    return ticks / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize(("spares", "warm"), [("1", True), ("0", False)], ids=["spare", "no-spare"])
def test_a_dead_childs_slot_gets_the_warm_spare(tmp_path, spares, warm):
    """With a spare, the attempt after a crash runs in a child started before the
    first child died (warm, once the slot's child was ready); without one, in a child
    started once the first child had died."""
    import rt_app
    from helpers import start_worker, stop_worker

    from ductline.stores import open_store

    url = f"sqlite:///{tmp_path}/spares.db"
    store = open_store(url)
    store.migrate()
    pids = tmp_path / "pids"
    worker = start_worker(url, concurrency=1, env={"DUCTLINE_SPARE_CHILDREN": spares})
    try:
        handle = rt_app.pid_crash.trigger(str(pids), database=store)
        assert handle.wait(90) == "completed"
        (first, first_called), (second, _) = (line.split() for line in pids.read_text().splitlines())
        second_started = _started_since_boot(int(second))  # still alive: the slot's child now
    finally:
        assert stop_worker(worker) == 0
        store.close()
    assert first != second
    tick = 1 / os.sysconf("SC_CLK_TCK")  # a start time is cut to a clock tick
    died = float(first_called) + rt_app.CRASH_AFTER_SECONDS  # at the earliest
    assert (second_started < died - tick) is warm, (second_started, died)


def _children_of(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
            for c in (task / "children").read_text().split()]


def test_the_spares_start_once_the_slots_children_are_ready(tmp_path):
    """Started beside the slots' children, spares would compete with them for the CPU
    the first attempts wait for: the spare starts after the slot's child imported its
    app (which takes ``IMPORT_SECONDS``), not with it."""
    import slow_import_app
    from helpers import start_worker, stop_worker, wait_for

    url = f"sqlite:///{tmp_path}/spares.db"
    worker = start_worker(url, concurrency=1, env={"DUCTLINE_SPARE_CHILDREN": "1"}, app=slow_import_app.__file__)
    try:
        slot_child, spare = sorted(wait_for(lambda: len(found := _children_of(worker.pid)) == 2 and found),
                                   key=_started_since_boot)
        apart = _started_since_boot(spare) - _started_since_boot(slot_child)
    finally:
        assert stop_worker(worker) == 0
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert apart >= slow_import_app.IMPORT_SECONDS - tick, apart


@pytest.mark.parametrize("bad", ["-1", "1.5", "two"])
def test_a_bad_spare_count_is_refused(monkeypatch, bad):
    monkeypatch.setenv("DUCTLINE_SPARE_CHILDREN", bad)
    with pytest.raises(ConfigurationError, match="spare_children"):
        load_settings()


# -- the spares themselves (real children) ------------------------------------------------
class SparesUnderTest:
    """`Spares` of children importing no app; `fresh` keeps what it handed out, so
    every child started is killed and reaped at teardown."""

    def __init__(self):
        self.made = []
        self.taken = []

    def __call__(self, count, message_cap=1 << 20):
        from ductline.runtime.spares import Spares

        spares = Spares([], [], count, message_cap)
        self.made.append(spares)
        return spares

    def fresh(self, spares):
        child = spares.fresh()
        self.taken.append(child)
        return child

    def close(self):
        for child in self.taken + [c for spares in self.made for c in spares.children()]:
            child.signal_group(signal.SIGKILL)
            child.process.wait()
            child.close()


@pytest.fixture
def spares_of():
    made = SparesUnderTest()
    yield made
    made.close()


def test_without_a_live_spare_a_slot_gets_a_new_child(spares_of):
    spares = spares_of(0)
    child = spares_of.fresh(spares)
    assert child.exited() is False and spares.children() == []


def test_a_dead_spare_is_reaped_and_replaced(spares_of):
    spares = spares_of(1)
    spares.fill()
    [dead] = spares.children()
    dead.signal_group(signal.SIGKILL)
    dead.process.wait()
    child = spares_of.fresh(spares)
    assert child is not dead and not child.exited()
    assert dead.conn.closed  # reaped: its descriptors closed
    # Its replacement starts at the next fill (the worker's loop fills after the
    # attempt the taken child serves has started), not inside fresh().
    assert spares.children() == []
    spares.fill()
    [replacement] = spares.children()
    assert replacement is not child and replacement is not dead


def test_a_spare_that_said_it_is_ready_is_taken_before_one_still_starting(spares_of):
    spares = spares_of(2)
    spares.fill()
    starting, ready = spares.children()
    os.kill(starting.pid, signal.SIGSTOP)  # before it could import anything: it cannot say ready
    assert ready.conn.poll(60 * PATIENCE)  # its READY arrived
    assert spares_of.fresh(spares) is ready and ready.ready
    assert spares.children() == [starting] and not starting.ready


def test_a_spare_whose_first_message_is_too_long_is_killed_and_never_trusted(spares_of):
    spares = spares_of(1, message_cap=1)  # even READY is longer than one byte
    spares.fill()
    [spare] = spares.children()
    assert spare.conn.poll(60 * PATIENCE)
    spares_of.fresh(spares)
    assert spare.eof and not spare.ready
    assert spare.process.wait(60) == -signal.SIGKILL
