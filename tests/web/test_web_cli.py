"""``ductline dashboard``: registered on the CLI, loopback by default."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ductline.cli import cli
from ductline.errors import TargetError
from ductline.web import create_app
from ductline.web.command import _loopback


def test_dashboard_command_is_registered_with_its_options():
    result = CliRunner().invoke(cli, ["dashboard", "--help"])
    assert result.exit_code == 0
    for option in ("--host", "--port", "--app", "--database"):
        assert option in result.output
    assert "127.0.0.1" in result.output and "8765" in result.output


def test_loopback_hosts():
    assert _loopback("127.0.0.1") and _loopback("::1") and _loopback("localhost")
    assert not _loopback("0.0.0.0") and not _loopback("example.org")


def test_an_app_that_cannot_be_imported_is_a_clear_error(sqlite_store, tmp_path):
    with pytest.raises(TargetError, match="no such file"):
        create_app(sqlite_store, apps=[str(tmp_path / "missing_app.py")])


@pytest.fixture
def serve(monkeypatch):
    """Stands in for uvicorn's server: records how the command asked to serve and
    sends the served app one request for ``/`` (in-process, no socket)."""
    import uvicorn
    from starlette.testclient import TestClient

    served: dict = {}

    def run(app, **kwargs):
        served.update(kwargs)
        with TestClient(app, base_url=f"http://{kwargs['host']}", follow_redirects=False) as client:
            served["page"] = client.get("/")

    monkeypatch.setattr(uvicorn, "run", run)
    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    monkeypatch.delenv("DUCTLINE_DASHBOARD_READ_TOKEN", raising=False)
    return served


def test_the_command_serves_the_database_it_is_given_read_only_without_a_token(serve, tmp_path):
    database = f"sqlite:///{tmp_path}/served.db"
    result = CliRunner().invoke(cli, ["dashboard", "--database", database, "--port", "9123"])
    assert result.exit_code == 0, result.output
    assert serve["host"] == "127.0.0.1" and serve["port"] == 9123
    assert "ductline dashboard on http://127.0.0.1:9123/ (read-only: DUCTLINE_DASHBOARD_TOKEN not set)" in result.stderr
    assert serve["page"].status_code == 200 and "Read-only dashboard" in serve["page"].text
    assert (tmp_path / "served.db").exists()  # the command opened (and migrated) that database
    assert "visible to anyone" not in result.stderr


def test_the_command_on_a_network_address_warns_and_tokens_guard_it(serve, tmp_path, monkeypatch):
    monkeypatch.setenv("DUCTLINE_DASHBOARD_TOKEN", "act-token")
    result = CliRunner().invoke(cli, ["dashboard", "--database", f"sqlite:///{tmp_path}/served.db",
                                      "--host", "0.0.0.0", "--allowed-host", "ops.example", "--read-token", "rt"])
    assert result.exit_code == 0, result.output
    assert serve["host"] == "0.0.0.0" and serve["port"] == 8765
    assert "(actions need the token); reading needs the read token" in result.stderr
    assert "dashboard bound to 0.0.0.0: run data is visible to anyone who can reach it" in result.stderr
    # Reading needs the read token: the overview sends a visitor without it to log in.
    assert serve["page"].status_code in (302, 303, 307) and "/login" in serve["page"].headers["location"]
