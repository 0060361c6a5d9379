"""One worker per backend for the payload tests (each test uses its own runs), so the
module pays for a worker start twice, not once per test."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator
import subprocess

import pytest

from helpers import APP, start_worker, stop_worker, truncate

from ductline.store import Store, open_store

PAYLOAD_APP = APP.replace("rt_app.py", "payload_app.py")
INLINE = 65_536
MAX = 2_000_000
ENV = {"DUCTLINE_PAYLOAD_INLINE_BYTES": str(INLINE), "DUCTLINE_PAYLOAD_MAX_BYTES": str(MAX)}


@dataclass
class Running:
    url: str
    store: Store
    proc: subprocess.Popen[bytes]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def running(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A migrated database of each backend with one worker (64 KiB inline limit,
    2,000,000-byte hard limit) running the payload app."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('payloads') / 'ductline.db'}"
        migrating = open_store(url)
        migrating.migrate()
        migrating.close()
    else:
        url = request.getfixturevalue("pg_base_url")
        truncate(url)
    store = open_store(url)
    proc = start_worker(url, app=PAYLOAD_APP, env=ENV)
    yield Running(url, store, proc)
    stop_worker(proc)
    store.close()
