"""A real worker loop (real children) in a thread of the test process."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from helpers import wait_for

from ductline.config import load_settings
from ductline.runtime.launch import build_worker

ISO_APP = str(Path(__file__).parent.parent / "apps" / "iso_app.py")


@pytest.fixture
def inprocess_worker(store, monkeypatch):
    monkeypatch.setenv("DUCTLINE_RETRY_DELAY", "0")
    running = []

    def start(concurrency=1, app=ISO_APP, **settings):
        worker = build_worker(store, [app], concurrency,
                              load_settings(database_url=store.url, poll_interval=0.1, **settings))
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        running.append((worker, thread))
        wait_for(lambda: worker.slots[0].child is not None)
        return worker

    yield start
    for worker, thread in running:
        worker.request_stop()
        thread.join(30)
