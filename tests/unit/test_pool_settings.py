"""The connection settings: pool size and idle time, transaction pooling, a direct
LISTEN URL and the host name -- validated in one place, applied by open_store."""

from __future__ import annotations

import pytest

from ductline.config import load_settings
from ductline.errors import ConfigurationError
from ductline.store import open_store


def test_defaults_and_overrides(monkeypatch):
    for name in ("POOL_MAX_CONNECTIONS", "POOL_IDLE_SECONDS", "DATABASE_POOLING", "LISTEN_DATABASE_URL", "HOSTNAME"):
        monkeypatch.delenv(f"DUCTLINE_{name}", raising=False)
    settings = load_settings()
    assert (settings.pool_max_connections, settings.pool_idle_seconds, settings.database_pooling,
            settings.listen_database_url, settings.hostname) == (4, 60.0, "", "", "")
    monkeypatch.setenv("DUCTLINE_POOL_MAX_CONNECTIONS", "2")
    monkeypatch.setenv("DUCTLINE_DATABASE_POOLING", "transaction")
    monkeypatch.setenv("DUCTLINE_HOSTNAME", "host-7")
    settings = load_settings(pool_idle_seconds=5)
    assert (settings.pool_max_connections, settings.pool_idle_seconds, settings.database_pooling,
            settings.hostname) == (2, 5.0, "transaction", "host-7")


@pytest.mark.parametrize("name, value", [
    ("pool_max_connections", 0), ("pool_max_connections", "two"), ("pool_idle_seconds", 0),
    ("database_pooling", "statement"), ("database_pooling", "Transaction"),
])
def test_bad_values_are_refused(name, value):
    with pytest.raises(ConfigurationError, match=name):
        load_settings(**{name: value})


def test_open_store_applies_them(monkeypatch):
    monkeypatch.setenv("DUCTLINE_DATABASE_POOLING", "transaction")
    monkeypatch.delenv("DUCTLINE_LISTEN_DATABASE_URL", raising=False)
    monkeypatch.setenv("DUCTLINE_POOL_MAX_CONNECTIONS", "3")
    store = open_store("postgresql://nobody@127.0.0.1:1/none", application_name="ductline-test")
    dialect = store.dialect
    # Behind a transaction pooler without a direct URL nothing listens: callers poll.
    assert getattr(dialect, "listens") is False and getattr(dialect, "_max") == 3
    assert getattr(dialect, "application_name") == "ductline-test"
    monkeypatch.setenv("DUCTLINE_LISTEN_DATABASE_URL", "postgresql://nobody@127.0.0.1:2/direct")
    dialect = open_store("postgresql://nobody@127.0.0.1:1/none").dialect
    assert getattr(dialect, "listen_url") == "postgresql://nobody@127.0.0.1:2/direct"
    monkeypatch.delenv("DUCTLINE_DATABASE_POOLING")
    monkeypatch.delenv("DUCTLINE_LISTEN_DATABASE_URL")
    dialect = open_store("postgresql://nobody@127.0.0.1:1/none").dialect
    # Unset: the first connection finds out whether the URL leads through a pooler;
    # while none can be made, nothing listens (callers poll, which is always correct).
    assert getattr(dialect, "listen_url") is None and getattr(dialect, "listens") is False
