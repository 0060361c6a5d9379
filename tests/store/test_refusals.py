"""A database that refuses this process for good (no such database or role) is told
apart from one that is down, where the store translates the driver's error: the
worker waits only for the second (`StoreUnavailable.permanent`)."""

from __future__ import annotations

import os
import pickle
import socket

import pytest

from ductline.errors import StoreUnavailable
from ductline.store import open_store
from ductline.store.postgres import refused_for_good


PG_ADMIN_URL = os.environ.get("DUCTLINE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def pg_url(database: str) -> str:
    return f"{PG_ADMIN_URL.rpartition('/')[0]}/{database}"


def _refusal(url: str) -> StoreUnavailable:
    store = None
    with pytest.raises(StoreUnavailable) as caught:
        store = open_store(url)
        store.migrate()
    if store is not None:
        store.close()
    return caught.value


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("url", [
    pg_url("ductline_no_such_db"),
    PG_ADMIN_URL.replace("postgres@", "ductline_no_such_role@"),
    "sqlite:////nonexistent-ductline-dir/ductline.db",
])
def test_a_refusal_that_waiting_does_not_cure_is_permanent(url):
    assert _refusal(url).permanent


def test_a_server_that_does_not_answer_is_an_outage():
    refusal = _refusal(f"postgresql://postgres@127.0.0.1:{_refused_port()}/test")
    assert "Connection refused" in str(refusal) and not refusal.permanent


class _DriverError(Exception):
    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


@pytest.mark.parametrize("sqlstate, permanent", [
    ("3D000", True), ("28000", True), ("28P01", True),
    ("57P03", False), ("57P01", False), ("53300", False), ("08006", False),
])
def test_sqlstates_of_a_connected_session_decide(sqlstate, permanent):
    assert refused_for_good(_DriverError("FATAL: something", sqlstate)) is permanent


def test_permanent_survives_pickling():
    refusal = pickle.loads(pickle.dumps(StoreUnavailable("no such database", permanent=True)))
    assert refusal.permanent and str(refusal) == "no such database"
    assert not pickle.loads(pickle.dumps(StoreUnavailable("down"))).permanent
