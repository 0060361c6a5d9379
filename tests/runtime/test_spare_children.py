"""``spare_children``: how many warm children a worker keeps besides its slots'."""

from __future__ import annotations

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


@pytest.mark.parametrize("bad", ["-1", "1.5", "two"])
def test_a_bad_spare_count_is_refused(monkeypatch, bad):
    monkeypatch.setenv("DUCTLINE_SPARE_CHILDREN", bad)
    with pytest.raises(ConfigurationError, match="spare_children"):
        load_settings()
