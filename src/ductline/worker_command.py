"""``ductline worker``: run workers for the pipelines of the apps given, in this
process or in supervised processes (``--processes``), until a signal stops them."""

from __future__ import annotations

import os
import sys

import click

from ductline.command_support import (console, database_option, refused_for_good, stop_on_signals,
                                      store_when_available)
from ductline.config import load_settings
from ductline.observability import runlog


@click.command()
@click.option("--app", "apps", multiple=True, required=True, metavar="MODULE_OR_FILE",
              help="Module or file defining pipelines (repeat for several).")
@click.option("--concurrency", type=click.IntRange(min=1), default=None,
              help="Child slots per process (default: CPUs).")
@click.option("--processes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes, supervised and restarted when they die.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None,
              help="Serve Prometheus metrics on this port (process i of --processes uses PORT+i).")
@click.option("--metrics-host", default=None, help="Address for --metrics-port (default 127.0.0.1).")
@click.option("--queue", "queues", multiple=True,
              help="Claim jobs of this queue (repeat for several; default: DUCTLINE_QUEUES, else 'default').")
@database_option
def worker(apps: tuple[str, ...], concurrency: int | None, processes: int, metrics_port: int | None,
           metrics_host: str | None, queues: tuple[str, ...], database: str | None) -> None:
    """Run a worker: claim jobs of the apps' pipelines and run them."""
    from ductline.runtime.launch import build_worker, supervise, worker_argv
    from ductline.runtime.shutdown import bound_startup

    if queues:
        # Through the environment, so the processes of --processes serve them too.
        os.environ["DUCTLINE_QUEUES"] = ",".join(queues)
    if metrics_port is not None:
        os.environ["DUCTLINE_METRICS_PORT"] = str(metrics_port)
    if metrics_host:
        os.environ["DUCTLINE_METRICS_HOST"] = metrics_host

    slots = concurrency or os.cpu_count() or 2
    if processes > 1:
        refused_for_good(database)  # not N processes restarted forever on the same refusal
        sys.exit(supervise(worker_argv(list(apps), slots, database), processes))
    settings = load_settings(database_url=database)
    stop = stop_on_signals()
    # A stop asked while the database holds the start-up (a migration waiting for a
    # lock) ends the process at the grace, as it would once the worker runs.
    guard = bound_startup(settings.shutdown_grace_seconds)
    store = store_when_available(database, stop)
    w = build_worker(store, list(apps), slots, settings)
    w.install_signal_handlers(guard=guard)  # from here a signal stops the worker gracefully
    if stop.is_set():  # asked while the apps were imported
        console.print("stopped before starting: nothing was claimed", highlight=False)
        return
    w.run()
    runlog.uninstall()  # the lines of the last runs it ended are written before it exits
