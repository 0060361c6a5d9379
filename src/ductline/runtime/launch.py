"""Starting workers: load the apps, build the `Worker`, and supervise several
worker processes when asked to."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time

from ductline.apps import import_app
from ductline.config import Settings
from ductline.dsl.pipeline import _REGISTRY
from ductline.errors import DefinitionError, TargetError
from ductline.observability.setup import env_port
from ductline.runtime.worker import Worker
from ductline.store import Store

log = logging.getLogger("ductline.worker")


def build_worker(store: Store, apps: list[str], concurrency: int, settings: Settings, *,
                 only: str | None = None) -> Worker:
    """Import the apps and make a worker for every pipeline they define.

    Args:
        only: serve just this pipeline and fire no schedules (``ductline run``: one
            run, without doing other work found in the database).

    Raises:
        TargetError: an app cannot be imported or defines no pipeline.
    """
    folders = []
    for spec in apps:
        _, folder = import_app(spec)
        if folder:
            folders.append(folder)
    definitions = {}
    for name, pipeline in list(_REGISTRY.items()):
        if only is not None and name != only:
            continue
        try:
            definitions[name] = pipeline.definition()
        except DefinitionError as exc:
            log.error("Pipeline %r is invalid and will not be run: %s", name, exc)
    if not definitions:
        raise TargetError(f"the apps {apps} define no ductline Pipeline")
    from ductline.observability import runlog
    from ductline.observability.setup import install_from_env

    install_from_env(store)  # metrics endpoint, StatsD, OpenTelemetry: as the environment asks
    runlog.install(store, settings.run_log_level)  # one line per run it ends
    return Worker(store, definitions, apps, concurrency, settings, sys_path=folders,
                  fire_schedules=only is None)


def supervise(argv: list[str], processes: int, restart_delay: float = 1.0) -> int:
    """Run ``processes`` copies of a single-process worker command, restart any that
    dies, and pass SIGTERM/SIGINT on to all of them. With ``DUCTLINE_METRICS_PORT=P``
    worker process ``i`` serves its metrics on port ``P + i``.

    Raises:
        ConfigurationError: ``DUCTLINE_METRICS_PORT`` is not a port (before any
            process is started).
    """
    # Read as each worker process reads it, refused here before any starts.
    base_port = env_port("DUCTLINE_METRICS_PORT")
    stopping = False
    children: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)

    def start(index: int) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        if base_port is not None:
            env["DUCTLINE_METRICS_PORT"] = str(base_port + index)
        # Workers get SIGTERM (a graceful stop) if the supervisor dies, never orphaned.
        return subprocess.Popen(argv, env=env, preexec_fn=_term_with_parent)

    children.extend(start(i) for i in range(processes))
    log.info("Supervisor %d started %d worker process(es)", os.getpid(), processes)
    while True:
        alive = False
        for i, child in enumerate(children):
            code = child.poll()
            if code is None:
                alive = True
            elif not stopping:
                log.warning("Worker process %d exited with %s; restarting", child.pid, code)
                time.sleep(restart_delay)
                children[i] = start(i)
                alive = True
        if not alive:
            return 0
        time.sleep(0.2)


def _term_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def worker_argv(apps: list[str], concurrency: int, database: str | None) -> list[str]:
    argv = [sys.executable, "-m", "ductline", "worker", "--processes", "1", "--concurrency", str(concurrency)]
    for app in apps:
        argv += ["--app", app]
    if database:
        argv += ["--database", database]
    return argv
