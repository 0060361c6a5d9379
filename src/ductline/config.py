"""Settings, loaded in one place: arguments > environment > TOML file > defaults.

Environment variables: ``DUCTLINE_DATABASE_URL``, ``DUCTLINE_LEASE_SECONDS``,
``DUCTLINE_RETRY_DELAY``, ``DUCTLINE_HEALTH_CHECK_INTERVAL``,
``DUCTLINE_KILL_GRACE_SECONDS``, ``DUCTLINE_POLL_INTERVAL``,
``DUCTLINE_SHUTDOWN_GRACE_SECONDS``, ``DUCTLINE_MAX_RELEASES``, ``DUCTLINE_MAX_UNDEAD``,
``DUCTLINE_PAYLOAD_INLINE_BYTES``, ``DUCTLINE_PAYLOAD_MAX_BYTES``, ``DUCTLINE_MAX_KEPT_EVENTS``,
``DUCTLINE_SQLITE_BUSY_TIMEOUT``, ``DUCTLINE_RETENTION``, ``DUCTLINE_STEP_LOG_LEVEL``,
``DUCTLINE_RUN_LOG_LEVEL``,
``DUCTLINE_STEP_LOG_MAX_BYTES``, ``DUCTLINE_POOL_MAX_CONNECTIONS``,
``DUCTLINE_POOL_IDLE_SECONDS``, ``DUCTLINE_DATABASE_POOLING``, ``DUCTLINE_LISTEN_DATABASE_URL``,
``DUCTLINE_HOSTNAME``, ``DUCTLINE_QUEUES``. The TOML file is ``ductline.toml`` in the
working directory (or the path in ``DUCTLINE_CONFIG``), with the same names in
lower case without the prefix, e.g. ``database_url = "postgresql://..."``.
A number written as text (a variable, a quoted value in the file) is taken in plain
ASCII decimal forms only (`ductline.numerals`): ``12``, ``2.5``; not ``١٢`` or ``1_0``.
"""

from __future__ import annotations

import difflib
import logging
import math
import os
import tomllib
import warnings
from dataclasses import dataclass, fields, replace
from typing import Any

from ductline.dsl.options import check_queue
from ductline.durations import MAX_SECONDS, parse_cli_duration
from ductline.errors import ConfigurationError

log = logging.getLogger("ductline.config")
from ductline.loglevels import check_level
from ductline.logreach import logs_somewhere as _logs_somewhere
from ductline.model.events import MAX_KEPT_EVENTS
from ductline.model.outcomes import MAX_RELEASES
from ductline.numerals import decimal_number, whole_number


@dataclass(frozen=True, slots=True)
class Settings:
    """Engine settings.

    Attributes:
        database_url: where state lives (default: ``ductline.db`` in the working directory).
        lease_seconds: how long a claim stays valid without a heartbeat; heartbeats
            are sent every third of it.
        retry_delay: default seconds between a failed attempt and the next.
        health_check_interval: seconds between health checks (dead children,
            expired leases of dead workers).
        kill_grace_seconds: between SIGTERM and SIGKILL when an attempt is killed.
        poll_interval: the longest a worker sleeps without looking for work.
        shutdown_grace_seconds: how long SIGTERM lets running attempts finish.
        max_releases: how many attempts of one job in a row a worker's shutdown grace
            may interrupt (each released, charged to neither ``max_retry`` nor
            ``max_crash``) before its run halts with ``job_releases_exhausted``. A
            whole number, at least 1 (default 5); the worker that records the
            interrupted attempt applies its own value.
        undead_after_seconds: how long after SIGKILL (for a thread: after the raised
            timeout) an attempt that has still not ended makes its slot *undead*.
            Default 1 s (docs/howto/timeouts.md, "Thread isolation and undead attempts"); raise it where a
            loaded machine unwinds threads slowly.
        max_undead: undead slots (threads or children that would not die) a worker
            tolerates; with more it stops claiming and reports itself unhealthy.
        spare_children: warm child processes a worker keeps besides one per slot, so
            a killed or retired child is replaced at once (at most one per slot;
            default 4). 0 saves their memory and start-up CPU; a replacement is
            then started when it is needed, and its slot waits for its imports.
        payload_inline_bytes: JSON values (outputs, inputs, trigger arguments) up to
            this many bytes are stored inline; larger ones out of line in chunks
            (`ductline.store.payloads`). Default 1 MiB (1,048,576).
        payload_max_bytes: a step output above this many bytes fails its attempt with
            `ductline.PayloadTooLarge`; trigger arguments above it are refused.
            Default 64 MiB (67,108,864).
        max_kept_events: the most events sent to one run that no wait has consumed
            yet (kept for a wait to come); a send that would keep one more raises
            `ductline.TooManyKeptEvents`. A whole number, at least 1 (default 1,000);
            the sender's value applies.
        sqlite_busy_timeout: seconds a SQLite statement waits for another
            process's write lock before it fails with "database is locked".
        retention: how long ended runs are kept (``30d``, ``12h``, ``90m``,
            ``3600s`` or seconds); workers delete older ones in small batches
            (`ductline.operations.prune`), and the rows of workers gone that long.
            Empty (the default): kept forever.
        step_log_level: the lowest level of what steps log that is kept
            (``DEBUG`` .. ``CRITICAL``, default ``INFO``); a step's own
            ``log_level=`` wins (`ductline.execution.steplog`).
        step_log_max_bytes: the most log text kept per attempt, in bytes (default
            1 MiB); what passes it is dropped and the cut marked.
        run_log_level: the level of the line a worker logs when a run it advanced
            ends (logger ``ductline.runs``; ``DEBUG`` .. ``CRITICAL``, default
            ``INFO``; `ductline.observability.runlog`).
        pool_max_connections: the most PostgreSQL connections one process's pool
            opens (it keeps one open and grows to this under load). Default 4.
        pool_idle_seconds: a pooled PostgreSQL connection unused this long is
            closed (one per interval, down to one). Default 60.
        database_pooling: ``"transaction"`` when ``database_url`` points at a
            transaction-pooling proxy (PgBouncer ``pool_mode = transaction``): no
            server-side prepared statements, and LISTEN goes to
            ``listen_database_url`` or, without one, workers and waiting clients
            poll. ``"session"``: a pooler that keeps each client on one server
            session (``pool_mode = session``), used as a direct connection. Empty
            (the default): the first connection finds out whether the URL leads
            through a pooler (the server process running its statements is not the
            one the connection was given) and, if it does, works as with
            ``"transaction"`` and logs a warning once
            (`ductline.store.postgres.pooler`).
        listen_database_url: a direct PostgreSQL URL (not through a transaction
            pooler) for the LISTEN connection. Empty: ``database_url`` is used,
            unless ``database_pooling`` is ``"transaction"`` (then: polling).
        hostname: the host name a worker registers under (default: the machine's).
        queues: the queues a worker claims from, separated by commas (default
            ``default``; ``ductline worker --queue`` wins). `queue_names` gives them
            as a list.
    """

    database_url: str = "sqlite:///ductline.db"
    lease_seconds: float = 30.0
    retry_delay: int = 10
    health_check_interval: float = 5.0
    kill_grace_seconds: float = 1.0
    poll_interval: float = 1.0
    shutdown_grace_seconds: float = 30.0
    max_releases: int = MAX_RELEASES
    undead_after_seconds: float = 1.0
    max_undead: int = 2
    spare_children: int = 4
    payload_inline_bytes: int = 1_048_576
    payload_max_bytes: int = 67_108_864
    max_kept_events: int = MAX_KEPT_EVENTS
    sqlite_busy_timeout: float = 30.0
    retention: str = ""
    step_log_level: str = "INFO"
    step_log_max_bytes: int = 1_048_576
    run_log_level: str = "INFO"
    pool_max_connections: int = 4
    pool_idle_seconds: float = 60.0
    database_pooling: str = ""
    listen_database_url: str = ""
    hostname: str = ""
    queues: str = "default"

    @property
    def queue_names(self) -> list[str]:
        """``queues`` as a sorted list of distinct names."""
        return sorted({name.strip() for name in self.queues.split(",") if name.strip()})

    @property
    def retention_seconds(self) -> int | None:
        """The ``retention`` setting in seconds, ``None`` when runs are kept forever."""
        return parse_cli_duration(self.retention, field="retention") if self.retention.strip() else None

    @property
    def lease_ms(self) -> int:
        return int(self.lease_seconds * 1000)


_POSITIVE = ("lease_seconds", "undead_after_seconds", "payload_inline_bytes", "payload_max_bytes",
             "step_log_max_bytes", "pool_max_connections", "pool_idle_seconds", "max_releases",
             "max_kept_events")
# What a positive whole-number setting is for, said when a value is refused.
_AT_LEAST_ONE = {"max_releases": "a whole number, at least 1: how many attempts in a row a shutdown may "
                                  "interrupt before the run halts",
                 "max_kept_events": "a whole number, at least 1: how many unconsumed events a run keeps",
                 "lease_seconds": "at least 0.1 s: a shorter lease expires before a claim's round trip to the "
                                  "database and a heartbeat can renew it, so no attempt could ever finish; "
                                  "the default is 30 s"}
# Settings with a floor above zero (explained in the message above).
_MINIMUM = {"lease_seconds": 0.1}
_TEXTS = ("database_url", "retention", "step_log_level", "run_log_level", "database_pooling", "listen_database_url",
          "hostname", "queues")
_INTS = ("retry_delay", "max_releases", "max_kept_events", "max_undead", "spare_children", "payload_inline_bytes",
         "payload_max_bytes", "step_log_max_bytes", "pool_max_connections")
POOLING_MODES = ("", "transaction", "session")
# The float settings and retry_delay are durations in seconds: at most the longest
# duration a definition takes (stored in milliseconds, added to the database clock).
# A count or a size fits a signed 64-bit column.
_INT_SECONDS = ("retry_delay",)
_MAX_INT = 2**63 - 1


def _coerce(name: str, kind: type, raw: Any, source: str) -> Any:
    value: int | float
    seconds = kind is float or name in _INT_SECONDS
    try:
        if kind is str:
            if not isinstance(raw, str):
                raise TypeError
            return raw
        if kind is int:
            if isinstance(raw, bool):
                raise TypeError
            # Text only in ASCII digits: int() would also take "١٢" or "1_0".
            value = whole_number(raw) if isinstance(raw, str) else int(raw)
            if isinstance(raw, float):  # after int(), whose OverflowError names an infinity's limit
                raise ValueError
        else:
            if isinstance(raw, bool):
                raise TypeError
            value = decimal_number(raw) if isinstance(raw, str) else float(raw)
            if math.isnan(value):
                raise ValueError
            if value == math.inf:  # too large ("1e999", inf): said with the limit, not as a bad value
                raise OverflowError
        if value < 0 or (name in _POSITIVE and value <= 0) or value < _MINIMUM.get(name, 0):
            raise ValueError
        if value > (MAX_SECONDS if seconds else _MAX_INT):
            raise OverflowError
        return value
    except OverflowError:  # an infinity or a number the store cannot hold, refused at once
        limit = f"at most {MAX_SECONDS} s, 100 years" if seconds else f"at most {_MAX_INT}"
        raise ConfigurationError(f"{source}: invalid value {raw!r} for {name} ({limit})") from None
    except (TypeError, ValueError):
        why = f" ({_AT_LEAST_ONE[name]})" if name in _AT_LEAST_ONE else ""
        raise ConfigurationError(f"{source}: invalid value {raw!r} for {name}{why}") from None


# The settings last built without overrides, and what they were built from: the
# environment's DUCTLINE_* variables and the file's identity. A trigger reads its
# settings on every call, and building them costs more than its own encoding.
_last: tuple[Any, Settings] | None = None
# The mapping under os.environ, which its changes write through (CPython's: bytes
# to bytes on POSIX). A copy of it as last seen, and its DUCTLINE_* items: while it
# compares equal (in C), they are not looked for again -- iterating os.environ and
# decoding every name was most of what a trigger paid for its settings.
_ENVIRON_DATA: "dict[Any, Any] | None" = getattr(os.environ, "_data", None)
_environment: tuple[dict[Any, Any] | None, Any] = (None, [])
_PREFIX: Any = b"DUCTLINE_" if os.supports_bytes_environ else "DUCTLINE_"
_CONFIG_NAME: Any = b"DUCTLINE_CONFIG" if os.supports_bytes_environ else "DUCTLINE_CONFIG"


def _inputs() -> Any:
    """What settings without overrides depend on: every ``DUCTLINE_*`` variable and
    the file's path, size and modification time (``None`` when there is none)."""
    global _environment
    data = _ENVIRON_DATA
    if data is None:  # pragma: no cover - an interpreter without CPython's mapping
        env: Any = [(key, os.environ[key]) for key in os.environ if key.startswith("DUCTLINE_")]
    elif data == _environment[0]:  # compared in C: nothing in the environment changed
        env = _environment[1]
    else:
        env = [item for item in data.items() if item[0].startswith(_PREFIX)]
        _environment = (dict(data), env)
    # DUCTLINE_CONFIG is among them (os.environ.get would raise and catch a KeyError
    # without it, as os.stat would raise for a missing file: os.access raises nothing).
    path = next((os.fsdecode(value) for key, value in env if key == _CONFIG_NAME), "ductline.toml")
    if not os.access(path, os.F_OK):
        return env, path, None
    try:
        stat = os.stat(path)
    except OSError:
        return env, path, None
    return env, path, (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the TOML file, the environment and ``overrides``
    (``None`` values are ignored).

    Without overrides, the settings are built again only when a ``DUCTLINE_*``
    variable or the file (its size or modification time) changed since the last call.

    Raises:
        ConfigurationError: an unreadable file or an invalid value.
    """
    global _last
    if any(value is not None for value in overrides.values()):
        return _build(overrides)
    inputs = _inputs()
    last = _last
    if last is not None and last[0] == inputs:
        return last[1]
    settings = _build({})
    _last = (inputs, settings)
    return settings


def _build(overrides: dict[str, Any]) -> Settings:
    types = {f.name: (str if f.name in _TEXTS else int if f.name in _INTS
                      else float)
             for f in fields(Settings)}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}  # where each value came from, named by the errors checked after the merge
    path = os.environ.get("DUCTLINE_CONFIG", "ductline.toml")
    if "DUCTLINE_CONFIG" in os.environ and not os.path.exists(path):
        raise ConfigurationError(f"DUCTLINE_CONFIG names {path!r}, which does not exist")
    if os.path.exists(path):
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except UnicodeDecodeError as exc:  # TOML is UTF-8 text; tomllib lets the decoding error through
            raise ConfigurationError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigurationError(f"{path}: {exc}") from exc
        for key, raw in data.items():
            if key not in types:
                raise ConfigurationError(f"{path}: unknown setting {key!r}{_did_you_mean(key, types)}")
            values[key] = _coerce(key, types[key], raw, path)
            sources[key] = path
    for key, kind in types.items():
        env = f"DUCTLINE_{key.upper()}"
        if env in os.environ:
            values[key] = _coerce(key, kind, os.environ[env], env)
            sources[key] = env
    _warn_misspelt_variables(types)
    for key, raw in overrides.items():
        if raw is not None:
            if key not in types:
                raise ConfigurationError(f"unknown setting {key!r}{_did_you_mean(key, types)}")
            values[key] = _coerce(key, types[key], raw, "argument")
            sources[key] = "argument"
    for level in ("step_log_level", "run_log_level"):
        try:
            values[level] = check_level(values.get(level, "INFO"), level)
        except ValueError as exc:
            raise ConfigurationError(f"{sources.get(level, 'default')}: {exc}") from None
    settings = replace(Settings(), **values)
    if settings.database_pooling not in POOLING_MODES:
        raise ConfigurationError(f"{sources.get('database_pooling', 'default')}: invalid value "
                                 f"{settings.database_pooling!r} for database_pooling: use \"transaction\" "
                                 "(behind PgBouncer in transaction mode), \"session\" (behind a pooler "
                                 "in session mode) or leave it empty (found out at the first connection)")
    try:
        if not settings.queue_names:
            raise ValueError("queues must name at least one queue")
        for name in settings.queue_names:
            check_queue(name, "queues")
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{sources.get('queues', 'default')}: {exc}") from None
    try:
        settings.retention_seconds  # noqa: B018 - validated here, once, for every caller
    except ValueError as exc:
        raise ConfigurationError(f"{sources.get('retention', 'default')}: {exc}") from None
    return settings


# ``DUCTLINE_*`` variables read outside the settings (the dashboard's, the metrics'
# and tracing's, the configuration file's path, and those a worker sets for its children).
OTHER_VARIABLES = frozenset({
    "DUCTLINE_CONFIG", "DUCTLINE_DASHBOARD_TOKEN", "DUCTLINE_DASHBOARD_READ_TOKEN",
    "DUCTLINE_DASHBOARD_ALLOWED_HOSTS", "DUCTLINE_METRICS_PORT", "DUCTLINE_METRICS_HOST",
    "DUCTLINE_METRICS_GAUGE_INTERVAL", "DUCTLINE_STATSD_ADDRESS", "DUCTLINE_OTEL", "DUCTLINE_FAULT",
    "DUCTLINE_CHILD_APPS", "DUCTLINE_CHILD_FD", "DUCTLINE_CHILD_HORIZON_FD", "DUCTLINE_CHILD_LEDGER_FD",
    "DUCTLINE_CHILD_PARENT", "DUCTLINE_CHILD_PATH",
})
_warned_variables: set[str] = set()


def _warn_misspelt_variables(types: dict[str, Any]) -> None:
    """Warn (once per name and process) of a ``DUCTLINE_*`` variable that ductline does
    not read but that is one typo away from one it does: ``DUCTLINE_DATABSE_URL``
    would otherwise leave a worker on the default database without a word. Other
    unknown names are left alone (an application may use the prefix for its own)."""
    known = {f"DUCTLINE_{key.upper()}" for key in types} | OTHER_VARIABLES
    for name in os.environ:
        if not name.startswith("DUCTLINE_") or name in known or name in _warned_variables:
            continue
        close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.9)
        if close:
            _warned_variables.add(name)
            message = f"{name} is not a ductline setting and is ignored (did you mean {close[0]}?)"
            if _logs_somewhere(log):
                log.warning(message)
            else:  # a program that configured no logging (ductline's own handler drops records)
                warnings.warn(message, UserWarning, stacklevel=4)


def _did_you_mean(key: str, known: dict[str, Any]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
