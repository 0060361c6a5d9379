"""Helpers shared by the tests (import as `helpers`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest


def truncate(url: str) -> None:
    """Empty every ductline table of a PostgreSQL test database (not the schema version).

    Only tables whose heap has a page are truncated: one without has held no row since
    it was last truncated (or created), so it is already what a truncate would leave.
    Each truncated table costs new files and their removal (about 20 ms each, several
    hundred ms for all of them), and most tests write to a few tables only."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'ductline%%' "
            "AND tablename <> 'ductline_schema_version' "
            "AND pg_relation_size(quote_ident(tablename)::regclass) > 0")]
        if tables:
            # CASCADE: a table that references one of these is emptied with it, written or not.
            conn.execute("TRUNCATE " + ", ".join(tables) + " CASCADE")


# Waits end as soon as their condition holds; their limits only bound a failure. On a
# loaded machine (CI beside other jobs, a load generator) everything takes longer, so
# every limit is multiplied by this factor (DUCTLINE_TEST_PATIENCE, default 3).
PATIENCE = float(os.environ.get("DUCTLINE_TEST_PATIENCE", "3"))


def with_store(url: str, use: Callable[[Any], Any], **kwargs: Any) -> Any:
    """``use(store)`` on a store of ``url`` (``open_store``'s ``kwargs``) closed after:
    a store left to the garbage collector leaves its SQLite connections unclosed, which
    Python 3.13 reports (a ResourceWarning, an error in this suite)."""
    from ductline.store import open_store

    store = open_store(url, **kwargs)
    try:
        return use(store)
    finally:
        store.close()


def wait_for(condition: Callable[[], object], timeout: float = 30.0, interval: float = 0.02) -> object:
    """Poll until ``condition()`` is truthy; fail the test after ``timeout`` seconds
    (times `PATIENCE`)."""
    timeout *= PATIENCE
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"condition not met within {timeout} s: {condition}")
        time.sleep(interval)


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()
    except OSError:
        return None


def process_running(pid: int) -> bool:
    """``pid`` exists and is not a zombie (one whose dead parent awaits a reaper counts as gone)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def parent_pid(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[1])


APP = str(Path(__file__).parent / "apps" / "rt_app.py")

FAST_ENV = {
    "DUCTLINE_RETRY_DELAY": "0",
    "DUCTLINE_LEASE_SECONDS": "3",
    "DUCTLINE_HEALTH_CHECK_INTERVAL": "0.5",
    "DUCTLINE_POLL_INTERVAL": "0.2",
    "DUCTLINE_SHUTDOWN_GRACE_SECONDS": "5",
    # No warm spares: each of the suite's many worker starts spawns one or two child
    # processes fewer (the suite is CPU-bound by interpreter start-ups). A dead
    # child's slot then starts a new one; tests/runtime/test_spare_children.py
    # checks that a spare takes such a slot when there is one.
    "DUCTLINE_SPARE_CHILDREN": "0",
}


def start_worker(db_url: str, *, concurrency: int = 2, env: dict[str, str] | None = None,
                 app: str = APP, stderr: Any = None) -> subprocess.Popen[bytes]:
    """``stderr``: where its log goes (``None``: this process's stderr)."""
    full_env = {**os.environ, **FAST_ENV, **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ductline", "worker", "--app", app, "--database", db_url,
         "--concurrency", str(concurrency)],
        env=full_env, stderr=stderr,
    )
    STARTED.append(proc)
    return proc


def freeze_outside_a_write(proc: subprocess.Popen[bytes], db_url: str) -> None:
    """SIGSTOP a worker at a moment it holds no SQLite write lock: stopped inside a
    write (a heartbeat, a recording), it would hold the database from every other
    process until it is continued. On PostgreSQL a frozen worker's transaction holds
    only its own rows, so any moment will do."""
    if not db_url.startswith("sqlite:///"):
        proc.send_signal(signal.SIGSTOP)
        return
    import sqlite3

    path = db_url.removeprefix("sqlite:///")
    for _ in range(200):
        proc.send_signal(signal.SIGSTOP)
        probe = sqlite3.connect(path, timeout=0.2, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            proc.send_signal(signal.SIGCONT)  # frozen inside a write: let it finish, try again
        finally:
            probe.close()
    raise AssertionError(f"worker {proc.pid} held the SQLite write lock at every try")


# Every worker `start_worker` started, so that one a failing test did not stop is
# stopped after it (tests/conftest.py) instead of slowing every later test.
STARTED: list[subprocess.Popen[bytes]] = []


def stop_leaked(since: int) -> None:
    """Stop the workers started after ``len(STARTED)`` was ``since`` that still run."""
    leaked = STARTED[since:]
    del STARTED[since:]
    for proc in leaked:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a test may have frozen it
            stop_worker(proc)


def inprocess_worker_fixture(app: str, concurrency: int) -> Any:
    """A pytest fixture ``inprocess_worker``: a real worker loop (real children) in a
    thread of the test process, on the test's ``store``, with no retry delay.

    Bind it in a conftest or test module (``inprocess_worker =
    inprocess_worker_fixture(APP, 1)``); a test calls ``inprocess_worker(concurrency=N,
    app=PATH, **settings)`` (defaults: the ones given here; settings as
    `ductline.config.load_settings` takes them) and gets the running worker back once
    its first child is ready. Every worker started is stopped at teardown.
    """

    @pytest.fixture
    def inprocess_worker(store: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
        import threading

        from ductline.config import load_settings
        from ductline.runtime.launch import build_worker

        monkeypatch.setenv("DUCTLINE_RETRY_DELAY", "0")
        running: list[tuple[Any, threading.Thread]] = []

        def start(concurrency: int = concurrency, app: str = app, **settings: Any) -> Any:
            worker = build_worker(store, [app], concurrency,
                                  load_settings(database_url=store.url, poll_interval=0.1, **settings))
            thread = threading.Thread(target=worker.run, daemon=True)
            thread.start()
            running.append((worker, thread))
            wait_for(lambda: worker.slots[0].child is not None)
            return worker

        yield start
        for worker, thread in running:
            worker.request_stop()
            thread.join(30)

    return inprocess_worker


def shared_worker_fixture(app: str = APP) -> Any:
    """A module-scoped pytest fixture ``shared_worker``: one real worker process
    (`start_worker`'s defaults, ``app``) serving every test of a module on the
    module's ``shared_backend_url`` (tests/conftest.py), instead of one started and
    stopped per test: each start costs an interpreter, the package's import and two
    step children. For tests that look only at the runs they trigger."""

    @pytest.fixture(scope="module")
    def shared_worker(shared_backend_url: str) -> Iterator[subprocess.Popen[bytes]]:
        proc = start_worker(shared_backend_url, app=app)
        yield proc
        stop_worker(proc)

    return shared_worker


def stop_worker(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 15) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def stop_workers(procs: list[subprocess.Popen[bytes]], timeout: float = 15) -> None:
    """`stop_worker` for several workers side by side: each gets SIGTERM at once, then
    up to ``timeout`` seconds to exit (SIGKILL after). One after the other, a test's
    teardown waited for each worker's shutdown in turn."""
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        proc.send_signal(signal.SIGTERM)
    for proc in running:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def drive(store: Any, pipeline: Any, skip: tuple[str, ...] = (), queues: tuple[str, ...] = ("default",)) -> list[str]:
    """Run every ready job of ``pipeline`` in ``queues`` in this process (each step's
    function is called with its stored input) until none is ready; returns the steps run."""
    from ductline import codec
    from ductline.engine import record

    definition = pipeline.definition()
    ran: list[str] = []
    while True:
        jobs = [j for j in store.claim("test-driver", [pipeline.name], 10, 60_000, queues=queues)]
        if not jobs:
            return ran
        for job in jobs:
            if job.step in skip:
                continue
            node = definition.node(job.step)
            output = codec.dumps(node.func(*codec.loads(job.input)))
            with store.transaction() as tx:
                done = record.success(tx, definition, record.Attempt(
                    job.job_id, job.run_id, job.step, job.scope, job.attempt, job.lease_token), output, 0)
            assert done.outcome == "completed", done
            ran.append(job.step)


def ductline_in_process(*words: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``ductline WORDS`` run by the command line's own entry point (`ductline.cli.main`,
    what ``python -m ductline`` calls) in this process, as its own process would run
    it with piped output: its exit code (0 when it returned), its standard output and
    error apart, as text; no standard input; the variables ``env`` set while it runs.
    It costs no interpreter start and no import of the package, which a subprocess
    pays on every call (about 0.4 s of CPU).

    What a command's process makes from its environment when it starts is made anew
    for each call: the console its tables are drawn to (its width from ``COLUMNS``).
    The stores the command opened are closed after it (a command's process leaves
    them to its exit), but for those kept per URL for the whole process
    (`ductline.stores`), and the logging it set up for ``ductline`` is undone.

    For what a command does (its arguments, output, errors and exit codes); what needs
    the process boundary (signals, the process's exit, its start-up) keeps a subprocess.
    """
    import logging

    from click.testing import CliRunner

    from ductline import cli, command_support, stores, tables
    from ductline.store import Store

    opened: list[Store] = []
    real_init = Store.__init__

    def recording_init(self: Store, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        opened.append(self)

    logger = logging.getLogger("ductline")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    shared_out = command_support.out
    holders = [module for name, module in list(sys.modules.items())
               if name.startswith("ductline") and module is not None and vars(module).get("out") is shared_out]
    argv = sys.argv
    code = 0
    with CliRunner().isolation(env=env) as (stdout, stderr, _):
        sys.argv = ["ductline", *words]
        fresh_out = tables.output_console()  # sized by this call's COLUMNS, as at a process's start
        for module in holders:
            setattr(module, "out", fresh_out)
        Store.__init__ = recording_init  # type: ignore[method-assign]
        try:
            cli.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.argv = argv
            Store.__init__ = real_init  # type: ignore[method-assign]
            for module in holders:
                setattr(module, "out", shared_out)
            logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]
            kept = {id(store) for store in stores._open.values()}
            for store in opened:
                if id(store) not in kept:
                    store.close()
        out, err = stdout.getvalue().decode(), stderr.getvalue().decode()
    return subprocess.CompletedProcess(["ductline", *words], code, out, err)
