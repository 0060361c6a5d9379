"""The PostgreSQL dialect: a psycopg 3 connection pool, READ COMMITTED transactions,
claims with ``FOR UPDATE SKIP LOCKED`` and wake-ups by LISTEN/NOTIFY.

Nothing here keeps session state on a pooled connection (no session advisory locks,
no ``SET``, no LISTEN, no temporary tables), so the pool may sit behind a
transaction-pooling proxy such as PgBouncer (``pooling="transaction"``): there
psycopg prepares no server-side statements (the proxy would hand them to another
client's session), and LISTEN -- which needs a session of its own -- goes to a
direct ``listen_url`` or is replaced by polling. With ``pooling`` unset, the first
connection finds out whether it goes through a pooler (`pooler.through_pooler`).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Callable, Iterable, Iterator, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from ductline.errors import StoreError, StoreUnavailable
from ductline.store import queries
from ductline.store.postgres import pooler, pools, poolwarnings
from ductline.store.postgres.keepalive import tcp_settings

log = logging.getLogger("ductline.store")

CONNECT_TIMEOUT_SECONDS = 5
POOL_TIMEOUT_SECONDS = 15
# A pooled connection used this recently is not pinged at checkout: a server restart
# in between fails that one transaction with StoreUnavailable, which callers retry.
CHECK_IDLE_SECONDS = 1.0
CHANNEL = "ductline_jobs"
RUNS_CHANNEL = "ductline_runs"  # a run settled: the payload is its id
LISTEN_RETRY_MAX_SECONDS = 5.0


# The server's refusals that waiting does not cure (StoreUnavailable.permanent):
# the database does not exist (3D000 invalid_catalog_name), the role does not exist
# or may not log in, no pg_hba.conf entry (28000 invalid_authorization_specification),
# a wrong password (28P01 invalid_password), CONNECT not granted (42501). A server
# starting up or shutting down (57P03, 57P01), out of connections (53300) or not
# answering at all is an outage: waited for.
PERMANENT_SQLSTATES = frozenset({"3D000", "28000", "28P01", "42501"})
# libpq gives no SQLSTATE for a failed connection, only the server's message: these
# are the messages of the SQLSTATEs above (PostgreSQL's English texts; a server that
# answers in another language reads as an outage, as every refusal did before).
_REFUSED = re.compile(r'database ".*" does not exist|role ".*" does not exist|authentication failed for user'
                      r'|no pg_hba\.conf entry|is not permitted to log in|permission denied for database'
                      r'|no password supplied')


def refused_for_good(exc: BaseException) -> bool:
    """Whether a driver error is a refusal that waiting does not cure (see
    `PERMANENT_SQLSTATES`), rather than a database that is down or restarting."""
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate:
        return sqlstate in PERMANENT_SQLSTATES
    return _REFUSED.search(str(exc)) is not None


# A prepared statement that the server session lacks, or has already: this process's
# statements moved between server sessions, which only a transaction pooler does (the
# `database_pooling = "transaction"` setting keeps them unprepared).
POOLER_SQLSTATES = ("26000", "42P05")
POOLER_HINT = ("; behind a transaction pooler (PgBouncer's pool_mode = transaction), set "
               "DUCTLINE_DATABASE_POOLING=transaction (database_pooling in ductline.toml)")


def _translate(exc: Exception, what: str) -> StoreError:
    if isinstance(exc, (psycopg.OperationalError, PoolTimeout, psycopg.InterfaceError)):
        return StoreUnavailable(f"PostgreSQL {what}: {exc}", permanent=refused_for_good(exc))
    hint = POOLER_HINT if getattr(exc, "sqlstate", None) in POOLER_SQLSTATES else ""
    return StoreError(f"PostgreSQL {what}: {exc}{hint}")


def _unreachable(why: psycopg.Error) -> StoreUnavailable:
    return StoreUnavailable(f"PostgreSQL connection: {str(why).strip()}", permanent=refused_for_good(why))


# A result of more rows than this is not kept by the connection's statement cursor
# until its next statement: the cursor is closed, and the next statement opens another.
KEEP_RESULT_ROWS = 100


class _Connection(psycopg.Connection[Any]):
    """A pooled connection that runs the named statements on one cursor of its own.

    A cursor per statement (its adapters copied, its transformer built) was a
    quarter of psycopg's time in a statement, a tenth of a trigger's time in
    Python. The cursor keeps the last result until the next statement (a small
    one: see `KEEP_RESULT_ROWS`)."""

    _statements: "psycopg.Cursor[Any] | None" = None

    def statement_cursor(self) -> "psycopg.Cursor[Any]":
        cur = self._statements
        if cur is None or cur.closed:
            cur = self._statements = self.cursor()
        return cur

    def release_result(self, rows: int) -> None:
        """Drop the cursor (and the result it holds) after a result of ``rows`` rows
        above `KEEP_RESULT_ROWS`."""
        if rows > KEEP_RESULT_ROWS and self._statements is not None:
            self._statements.close()
            self._statements = None


_T = TypeVar("_T")


def _itself(conn: _Connection) -> _Connection:
    return conn


class _Session:
    def __init__(self, conn: _Connection, sql: dict[str, str]) -> None:
        self._conn = conn
        self._sql = sql

    def fetch(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        cur = self._conn.statement_cursor()
        try:
            cur.execute(self._sql[name], queries.safe_params(params))
            rows = cur.fetchall()
        except psycopg.Error as exc:
            raise _translate(exc, name) from exc
        self._conn.release_result(len(rows))
        return rows

    def execute(self, name: str, params: dict[str, Any] | None = None) -> int:
        try:
            return self._conn.statement_cursor().execute(self._sql[name], queries.safe_params(params)).rowcount
        except psycopg.Error as exc:
            raise _translate(exc, name) from exc

    def execute_many(self, name: str, params: Iterable[dict[str, Any]]) -> None:
        try:
            with self._conn.cursor() as cur:
                cur.executemany(self._sql[name], [queries.safe_params(p) for p in params])
        except psycopg.Error as exc:
            raise _translate(exc, name) from exc


class PostgresDialect:
    """PostgreSQL through a pool of at most ``max_connections`` connections.

    Args:
        url: the PostgreSQL URL of every pooled connection.
        max_connections: the pool's ceiling (it keeps one open, grows under load).
        idle_seconds: a pooled connection unused this long is closed (down to one).
        pooling: ``"transaction"`` when ``url`` is a transaction-pooling proxy,
            ``"session"`` when it is a pooler that keeps each client on one server
            session (then as direct), ``""``: found out at the first connection
            (`ductline.store.postgres.pooler`; a pooler found is taken as
            ``"transaction"``).
        listen_url: a direct URL for LISTEN; ``None``: ``url`` unless ``pooling``
            is (or is found to be) ``"transaction"``, in which case nothing
            listens (callers poll).
        application_name: what ``pg_stat_activity`` shows for this process's
            connections (the LISTEN connection adds ``-listen``).
    """

    name = "postgres"

    def __init__(self, url: str, *, max_connections: int = 4, idle_seconds: float = 60.0,
                 pooling: str = "", listen_url: str | None = None,
                 application_name: str = "ductline") -> None:
        self.url = url
        self._sql = queries.load("postgres")
        self._lock = threading.Lock()
        self._pool: ConnectionPool[Any] | None = None
        self._max = max_connections
        self._pool_warnings = poolwarnings.install()
        self._idle_seconds = idle_seconds
        self.pooling = pooling
        self.application_name = application_name
        self._listen_given = listen_url
        self._last_used: dict[int, float] = {}  # id(connection) -> when last handed back (monotonic)

    def _get_pool(self) -> ConnectionPool[Any]:
        with self._lock:
            if self._pool is None:
                # One direct attempt first: a server that refuses, a database or role
                # that does not exist fail now with the server's reason, instead of
                # after the pool's POOL_TIMEOUT_SECONDS of retrying in the background
                # (a one-shot command given a wrong URL). Once the pool exists, a
                # server that goes away is waited for, up to that timeout.
                why = self._why_unreachable(probe=True)
                if why is not None:
                    raise _unreachable(why)
                kwargs: dict[str, Any] = {"autocommit": True, "row_factory": dict_row,
                                          "connect_timeout": CONNECT_TIMEOUT_SECONDS,
                                          "application_name": self.application_name, **tcp_settings(self.url)}
                if self.pooling == "transaction":
                    # A prepared statement lives in one server session; behind a
                    # transaction pooler the next transaction may get another one.
                    kwargs["prepare_threshold"] = None
                self._pool = ConnectionPool(
                    self.url, connection_class=_Connection, min_size=1, max_size=self._max, open=True, timeout=POOL_TIMEOUT_SECONDS,
                    max_idle=self._idle_seconds, kwargs=kwargs,
                    name="ductline",
                    # A server restart leaves dead connections in the pool; checking at
                    # checkout spares callers the error, but costs a round trip, so only
                    # a connection idle for a while is checked (a busy worker's are not).
                    check=self._check,
                )
                pools.track(self._pool)  # closed at exit if this store is not closed before
            return self._pool

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        if time.monotonic() - self._last_used.get(id(conn), 0.0) >= CHECK_IDLE_SECONDS:
            ConnectionPool.check_connection(conn)

    def _conn(self) -> AbstractContextManager[_Connection]:
        return self._checkout(_itself)

    @contextmanager
    def _checkout(self, wrap: Callable[[_Connection], _T]) -> Iterator[_T]:
        """A pooled connection, given as ``wrap(connection)``: one context for
        `reader`'s session too (each nested one cost a trigger several microseconds)."""
        # getconn and putconn, not the pool's connection(): that one also enters the
        # connection's own context, whose exit commits -- nothing to commit on an
        # autocommit connection (transaction() commits its own), yet a tenth of a
        # trigger's time in Python. putconn rolls back a connection left inside a
        # transaction and replaces a broken one, as the context's exit would.
        pool = self._pool or self._get_pool()
        try:
            conn = pool.getconn()
            try:
                self._pool_warnings.connected()
                yield wrap(conn)
            finally:
                self._last_used[id(conn)] = time.monotonic()
                pool.putconn(conn)
        except PoolTimeout as exc:
            why = self._why_unreachable()
            raise (_unreachable(why) if why is not None
                   else StoreUnavailable(f"PostgreSQL connection: {exc}")) from exc
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise _translate(exc, "connection") from exc

    def _why_unreachable(self, probe: bool = False) -> psycopg.Error | None:
        """The pool only says it timed out; one direct attempt says why (refused,
        unknown role or database, bad password). ``probe``: with an unset
        ``pooling``, the attempt also finds out whether ``url`` leads through a pooler."""
        try:
            with psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_SECONDS,
                                 prepare_threshold=None) as conn:
                if probe and self.pooling == pooler.DETECT:
                    if pooler.through_pooler(conn):
                        pooler.warn_detected()
                        self.pooling = pooler.TRANSACTION
                    else:
                        self.pooling = pooler.SESSION  # direct: nothing to find out again
                return None
        except psycopg.Error as exc:
            return exc

    @property
    def listen_url(self) -> str | None:
        """The URL LISTEN connects to: the one given, else ``url`` unless it leads
        through a transaction pooler (``None``: nothing listens, callers poll).
        LISTEN through such a pooler would listen on a server session other clients
        share and then lose: only a direct connection may listen. With an unset
        ``pooling``, found out by a first connection; if that fails (the server is
        down), ``None`` until one succeeds: polling is correct either way."""
        if self._listen_given:
            return self._listen_given
        if self.pooling == pooler.DETECT:
            try:
                self._pool or self._get_pool()  # its first connection finds out
            except StoreError:
                return None
        return None if self.pooling == pooler.TRANSACTION else self.url

    @contextmanager
    def transaction(self) -> Iterator[_Session]:
        with self._conn() as conn:
            try:
                with conn.transaction():
                    yield _Session(conn, self._sql)
            except psycopg.Error as exc:
                raise _translate(exc, "commit") from exc

    def reader(self) -> AbstractContextManager[_Session]:
        return self._checkout(self._session)

    def _session(self, conn: _Connection) -> _Session:
        return _Session(conn, self._sql)

    def run_script(self, sql: str) -> None:
        with self._conn() as conn:
            try:
                with conn.transaction():
                    # One lock for every migrating process, released at commit.
                    conn.execute("SELECT pg_advisory_xact_lock(4242001)")
                    conn.execute(sql.encode())
            except psycopg.Error as exc:
                raise _translate(exc, "migration") from exc

    def table_exists(self, table: str) -> bool:
        with self._conn() as conn:
            row = conn.execute("SELECT to_regclass(%s) AS t", (table,)).fetchone()
            return row is not None and row["t"] is not None

    def _listen_connection(self, url: str) -> psycopg.Connection[Any]:
        return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS,
                               application_name=f"{self.application_name}-listen", **tcp_settings(url))

    @property
    def listens(self) -> bool:
        """Whether NOTIFY reaches this process (else its callers poll)."""
        return self.listen_url is not None

    def listen(self, on_notify: Callable[[str], None], stop: threading.Event) -> None:
        """Call ``on_notify(payload)`` for every NOTIFY on the jobs channel until
        ``stop`` is set. Runs in the caller's thread; reconnects after errors.
        Returns at once when nothing can listen (`listens` is false)."""
        url = self.listen_url
        if url is None:
            return
        failures = 0  # in a row: one warning for an outage, not one per reconnect attempt
        while not stop.is_set():
            try:
                with self._listen_connection(url) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    if failures:
                        log.warning("LISTEN connection restored (%d attempt(s) to reconnect failed)", failures - 1)
                        failures = 0
                    on_notify("cancel")  # anything that happened while we were away
                    while not stop.is_set():
                        for notice in conn.notifies(timeout=0.5, stop_after=64):
                            on_notify(notice.payload)
            except psycopg.Error as exc:
                failures += 1
                if failures == 1:
                    log.warning("LISTEN connection lost: %s; reconnecting in the background (callers poll "
                                "meanwhile; one line when it is back)", exc)
                else:
                    log.debug("LISTEN reconnect failed: %s", exc)
                # Polling is the source of truth meanwhile: back off to a few seconds.
                stop.wait(min(LISTEN_RETRY_MAX_SECONDS, 0.5 * 2 ** min(failures, 4)))

    @contextmanager
    def run_listener(self) -> Iterator[Callable[[float], list[str]] | None]:
        """LISTEN for runs that settle (``notify_settled``) on a connection of its
        own; yields ``wait(timeout_seconds) -> run ids`` (empty on timeout), or
        ``None`` when nothing can listen (`listens` is false: the caller polls).

        Raises:
            StoreUnavailable: the connection could not be made.
        """
        if self.listen_url is None:
            yield None
            return
        try:
            conn = self._listen_connection(self.listen_url)
        except psycopg.Error as exc:
            raise _translate(exc, "listen") from exc
        try:
            conn.execute(f"LISTEN {RUNS_CHANNEL}")

            def wait(timeout: float) -> list[str]:
                try:
                    return [n.payload for n in conn.notifies(timeout=max(0.0, timeout), stop_after=1)]
                except psycopg.Error as exc:
                    raise _translate(exc, "listen") from exc

            yield wait
        finally:
            conn.close()

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
