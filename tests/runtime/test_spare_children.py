"""``spare_children``: how many warm children a worker keeps besides its slots'."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
    first attempt (with the worker); without one, in a child started once the first
    child had died."""
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
    assert (second_started < float(first_called) - tick) is warm, (second_started, first_called)


@pytest.mark.parametrize("bad", ["-1", "1.5", "two"])
def test_a_bad_spare_count_is_refused(monkeypatch, bad):
    monkeypatch.setenv("DUCTLINE_SPARE_CHILDREN", bad)
    with pytest.raises(ConfigurationError, match="spare_children"):
        load_settings()
