"""One open `Store` per database URL per process, so pools are shared.

The stores opened here are closed when the interpreter exits (see
`ductline.store.postgres.pools` for why a pool left to the interpreter's
finalization delays the exit).
"""

from __future__ import annotations

import atexit
import os
import threading

from ductline.config import load_settings
from ductline.errors import SchemaError
from ductline.store import Store, open_store
from ductline.store.migrations import latest_version

_lock = threading.Lock()
_open: dict[tuple[int, str], Store] = {}


def store_for(database: object = None) -> Store:
    """The store for ``database``: a `Store`, a URL, or ``None`` for the configured one.

    The embedded default (SQLite) is migrated on first use; PostgreSQL must have
    been migrated with ``ductline migrate``.

    Raises:
        ConfigurationError: a malformed URL.
        SchemaError: PostgreSQL without the current schema.
        StoreUnavailable: the database cannot be reached.
    """
    if isinstance(database, Store):
        return database
    url = load_settings().database_url if database is None else database
    if not isinstance(url, str):
        raise TypeError(f"database must be a URL or a Store, not {type(url).__name__}")
    key = (os.getpid(), url)
    with _lock:
        store = _open.get(key)
        if store is None:
            store = open_store(url, application_name="ductline-app")
            ensure_schema(store)
            _open[key] = store
        return store


def close_all() -> None:
    """Close every store this process opened by URL (their pools' connections with
    them); the next `store_for` opens a new one."""
    with _lock:
        mine = [key for key in _open if key[0] == os.getpid()]
        closing = [_open.pop(key) for key in mine]
    for store in closing:
        store.close()


def ensure_schema(store: Store, *, migrate: bool = True) -> None:
    """Migrate SQLite automatically (unless ``migrate`` is false: commands that only
    read never write); require an explicit migration on PostgreSQL.

    Raises:
        SchemaError: the schema is older than this version of ductline and is not
            migrated here.
    """
    if store.dialect.name == "sqlite" and migrate:
        store.migrate()
        return
    have = store.schema_version()
    if have < latest_version(store.dialect.name):
        raise SchemaError(f"database schema is at version {have}; run `ductline migrate` first")


atexit.register(close_all)
