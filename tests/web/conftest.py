"""Fixtures of the dashboard tests: a seeded SQLite store and clients of the app."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import web_support  # noqa: E402

from ductline.store import Store, open_store  # noqa: E402
from ductline.web import create_app  # noqa: E402

from web_support import TOKEN  # noqa: E402


@pytest.fixture
def sqlite_store(tmp_path: Path, sqlite_template: Path) -> Iterator[Store]:
    # A copy of the migrated template (tests/conftest.py), not a migration per test.
    shutil.copyfile(sqlite_template, tmp_path / "web.db")
    store = open_store(f"sqlite:///{tmp_path}/web.db")
    yield store
    store.close()


@pytest.fixture
def seeded(sqlite_store: Store) -> dict[str, str]:
    """Run ids by state: completed, halted, running (an expand), delayed."""
    return web_support.seed(sqlite_store)


@pytest.fixture
def make_client(sqlite_store: Store, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    """``make_client(token=TOKEN)``: a TestClient of a dashboard over ``sqlite_store``;
    ``token=None`` makes a read-only dashboard."""
    from starlette.testclient import TestClient

    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    clients: list[Any] = []

    def make(token: str | None = TOKEN, **kwargs: Any) -> Any:
        client = TestClient(create_app(sqlite_store, token=token, poll_seconds=0.05, **kwargs),
                            base_url="http://localhost")
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(make_client: Callable[..., Any]) -> Any:
    return make_client()
