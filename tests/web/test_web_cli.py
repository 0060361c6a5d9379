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
