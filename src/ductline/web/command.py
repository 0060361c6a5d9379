"""``ductline dashboard``: serve the web dashboard with uvicorn."""

from __future__ import annotations

import ipaddress
import logging

import click

log = logging.getLogger("ductline.web")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback exposes run data to the network.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port to serve on.")
@click.option("--app", "apps", multiple=True, metavar="MODULE_OR_FILE",
              help="Module or file defining pipelines: their graphs are drawn and the API can start them.")
@click.option("--database", "database", metavar="URL", default=None,
              help="Database URL (default: DUCTLINE_DATABASE_URL or sqlite:///ductline.db).")
@click.option("--allowed-host", "allowed", multiple=True, metavar="NAME",
              help="Also serve requests whose Host is NAME (e.g. the name behind a proxy); '*' serves any.")
@click.option("--read-token", default=None, metavar="TOKEN",
              help="Require this token to read too (or set DUCTLINE_DASHBOARD_READ_TOKEN, which ps cannot show).")
def dashboard(host: str, port: int, apps: tuple[str, ...], database: str | None, allowed: tuple[str, ...],
              read_token: str | None) -> None:
    """Serve the dashboard: runs, graphs, attempts, workers; retry and cancel with
    DUCTLINE_DASHBOARD_TOKEN set (read-only without it)."""
    from ductline.extras import require

    require("dashboard")
    import uvicorn

    from ductline.web.app import create_app

    app = create_app(database=database, apps=list(apps), hosts=[host, *allowed], read_token=read_token,
                     warm_charts=True)
    access = app.state.dashboard.access
    if not _loopback(host):
        log.warning("dashboard bound to %s: run data is visible to anyone who can reach it", host)
    click.echo(f"ductline dashboard on http://{host}:{port}/ "
               + ("(actions need the token)" if access.enabled else "(read-only: DUCTLINE_DASHBOARD_TOKEN not set)")
               + ("; reading needs the read token" if access.read_token else ""), err=True)
    # Event streams stay open while a run is active: give them 5 s to go at shutdown.
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
