"""``ductline run`` says when workers already serving its database could run its
run's steps: they run the code they imported when they started, which need not be
the code on disk now (an edited step of a pipeline that kept its shape)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import APP, start_worker, stop_worker, wait_for

from ductline.model.serving import LIVE_WITHIN_SECONDS
from ductline.store import fleet

NOTE = "note: 1 other live worker(s) on this database serve this pipeline"


def run_chain(db_url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ductline", "run", f"{APP}:chain", "--args", "[1]",
                           "--database", db_url],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "400"})


@pytest.mark.parametrize("backend", ["sqlite"])
def test_run_names_other_live_workers_that_serve_its_pipeline(store, db_url):
    alone = run_chain(db_url)
    assert alone.returncode == 0, alone.stderr
    assert "other live worker" not in alone.stdout + alone.stderr
    worker = start_worker(db_url, concurrency=1)
    try:
        wait_for(lambda: len(fleet.live_offers(store, LIVE_WITHIN_SECONDS)) == 1, timeout=120)
        shared = run_chain(db_url)
        assert shared.returncode == 0, shared.stderr
        assert NOTE in shared.stdout + shared.stderr, shared.stdout + shared.stderr
    finally:
        stop_worker(worker)
