"""Both versions of pipeline "versioned", loaded side by side (import as
`version_support`): a process loads one module per pipeline name, so each version
is imported from its file under a module name of its own."""

from __future__ import annotations

import importlib.util
import logging
import sqlite3
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg

from ductline import codec
from ductline.engine import record

APPS = Path(__file__).parents[1] / "apps"
V1_APP = str(APPS / "version_v1.py")
V2_APP = str(APPS / "version_v2.py")


def _load(path: str, name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # The second module defines "versioned" again: that warning is expected here.
    logging.getLogger("ductline").disabled = True
    try:
        spec.loader.exec_module(module)
    finally:
        logging.getLogger("ductline").disabled = False
    return module


v1 = _load(V1_APP, "version_v1")
v2 = _load(V2_APP, "version_v2")
V1 = v1.versioned.definition()
V2 = v2.versioned.definition()


def drive(store: Any, definition: Any, steps: int = 1000) -> list[str]:
    """Run ready jobs of ``definition``'s runs in this process, one at a time, as a
    worker that loaded only it would, at most ``steps`` of them; returns the steps run."""
    ran: list[str] = []
    while len(ran) < steps:
        jobs = store.claim("version-driver", [definition.name], 1, 60_000, definitions=[definition.fingerprint])
        if not jobs:
            return ran
        for job in jobs:
            output = codec.dumps(definition.node(job.step).func(*codec.loads(job.input)))
            with store.transaction() as tx:
                done = record.success(tx, definition, record.Attempt(
                    job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token), output, 0)
            assert done.outcome == "completed", done
            ran.append(job.step)
    return ran


def sql(db_url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read the database directly (what a second host would see)."""
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            return conn.execute(query.replace("%s", "?"), params).fetchall()
        finally:
            conn.close()
    with psycopg.connect(db_url) as conn:
        return conn.execute(query, params).fetchall()
