"""Durable state: the `Store` and its SQLite and PostgreSQL dialects."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from ductline.errors import ConfigurationError
from ductline.store.store import Store, Tx

__all__ = ["Store", "Tx", "open_store", "DEFAULT_URL"]

DEFAULT_URL = "sqlite:///ductline.db"


def open_store(url: str, *, max_connections: int | None = None, create: bool = True,
               busy_timeout: float | None = None, application_name: str = "ductline") -> Store:
    """Open the store at a database URL.

    Args:
        url: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` or
            ``postgresql://user@host:port/database`` (``postgres://`` also works).
        max_connections: PostgreSQL: the pool's ceiling (default: the
            ``pool_max_connections`` setting, 4). The pool's idle timeout, the
            ``database_pooling`` mode and the LISTEN URL come from the settings
            (`ductline.config.Settings`).
        create: SQLite: create the database file if it does not exist (commands
            that only read pass ``False`` and get `StoreUnavailable` instead).
        busy_timeout: SQLite: seconds to wait for another process's write lock
            (default: the ``sqlite_busy_timeout`` setting, 30 s).
        application_name: PostgreSQL: the name its connections show in
            ``pg_stat_activity`` (``ductline-worker``, ``ductline-cli``, ...).

    Raises:
        ConfigurationError: the URL is malformed or names an unknown scheme.
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError(f"database URL must be a non-empty string, got {url!r}")
    parsed = urlparse(url)
    path = sqlite_path(url)
    if path is not None:
        from ductline.store.sqlite import SqliteDialect

        if busy_timeout is None:
            from ductline.config import load_settings

            busy_timeout = load_settings().sqlite_busy_timeout
        return Store(SqliteDialect(url, path, create=create, busy_timeout=busy_timeout))
    if parsed.scheme in ("postgresql", "postgres"):
        if not parsed.path.strip("/") and not parsed.netloc:
            raise ConfigurationError(f"malformed PostgreSQL URL {url!r}: name a host and a database")
        from ductline.extras import require

        require("postgres")
        from ductline.config import load_settings
        from ductline.store.postgres import PostgresDialect

        settings = load_settings()
        return Store(PostgresDialect(
            url, max_connections=max_connections or settings.pool_max_connections,
            idle_seconds=settings.pool_idle_seconds, pooling=settings.database_pooling,
            listen_url=settings.listen_database_url or None, application_name=application_name))
    raise ConfigurationError(
        f"unknown database URL scheme {parsed.scheme!r} in {url!r}: use sqlite:/// or postgresql://"
    )


def sqlite_path(url: str) -> str | None:
    """The file a ``sqlite:///`` URL names (``~`` expanded), or ``None`` for another scheme.

    Raises:
        ConfigurationError: a malformed SQLite URL.
    """
    parsed = urlparse(url)
    if parsed.scheme != "sqlite":
        return None
    if parsed.netloc or not parsed.path.startswith("/") or parsed.path in ("/", "/:memory:"):
        raise ConfigurationError(
            f"malformed SQLite URL {url!r}: use sqlite:///relative.db or sqlite:////absolute/path.db"
        )
    return os.path.expanduser(parsed.path[1:])
