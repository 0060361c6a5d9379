"""Driving pause pipelines in the test process: claim jobs with `Store.claim` and
record their outcomes with `ductline.engine.record`, against a real database
(import as `pause_support`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import drive  # noqa: F401 - the pause tests import it from here

from ductline.store import Store

APP = str(Path(__file__).parents[1] / "apps" / "pause_app.py")


def jobs_by_step(store: Store, run_id: str) -> dict[str, dict[str, Any]]:
    return {j["step"]: j for j in store.run_jobs(run_id)}
