"""A real worker loop (real children) in a thread of the test process, serving the
isolation app (`helpers.inprocess_worker_fixture`)."""

from __future__ import annotations

from pathlib import Path

from helpers import inprocess_worker_fixture

ISO_APP = str(Path(__file__).parent.parent / "apps" / "iso_app.py")

inprocess_worker = inprocess_worker_fixture(ISO_APP, concurrency=1)
