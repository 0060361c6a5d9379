"""``ductline schedules`` on both backends: the listing (table and --json) and the
operator's switch (disable / enable)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from click.testing import CliRunner

from ductline.schedule_command import schedules
from ductline.dsl.schedule import Schedule, next_tick_ms, tick_key
from ductline.store import schedules as rows


def cli(db_url, *args, check=True):
    """Run ``ductline schedules ARGS`` in this process (click's runner)."""
    # wide: the full table (whole ids, ISO times); tests/cli/test_cli_narrow.py checks 80 columns
    result = CliRunner().invoke(schedules, [*args, "--database", db_url], env={"COLUMNS": "200"})
    if check:
        assert result.exit_code == 0, (result.output, result.exception)
    return result


def seed(store):
    rows.sync(store, [Schedule("nightly", "reports", "0 3 * * *", '["eu",{"full":true}]'),
                      Schedule("often", "reports", "* * * * * */2", "[]")], ["reports"], next_tick_ms)
    with store.transaction() as tx:  # as a worker records a fired tick
        nightly = {r["name"]: r for r in rows.list_all(store)}["nightly"]
        rows.advance(tx, "nightly", "0 3 * * *", nightly["next_fire_ms"], nightly["next_fire_ms"] + 86_400_000,
                     last_fire_ms=nightly["next_fire_ms"])
        rows.set_last_run(tx, "nightly", "f" * 32)
    return nightly["next_fire_ms"]


def test_the_listing_shows_every_schedule_as_json_and_as_a_table(db_url, store):
    fired = seed(store)
    listed = json.loads(cli(db_url, "--json").stdout)
    assert [s["name"] for s in listed] == ["nightly", "often"]
    nightly = listed[0]
    assert nightly["pipeline"] == "reports" and nightly["cron"] == "0 3 * * *"
    assert nightly["args"] == ["eu", {"full": True}]
    assert nightly["enabled"] is True and nightly["state"] == "enabled"
    assert nightly["last_fire_ms"] == fired and nightly["next_fire_ms"] == fired + 86_400_000
    assert nightly["last_fire"] == tick_key("x", fired)[-20:].replace("Z", ".000Z")
    assert nightly["next_fire"].endswith("T03:00:00.000Z")
    assert nightly["last_run_id"] == "f" * 32
    assert listed[1]["last_fire"] is None and listed[1]["last_run_id"] is None

    # the real entry point, once
    table = subprocess.run([sys.executable, "-m", "ductline", "schedules", "--database", db_url],
                           capture_output=True, text=True, timeout=60, check=True,
                           env={**os.environ, "COLUMNS": "200"}).stdout
    for text in ("nightly", "often", "reports", "0 3 * * *", "* * * * * */2", "enabled", "f" * 32,
                 nightly["next_fire"]):
        assert text in table, (text, table)


def test_disable_and_enable_switch_a_schedule(db_url, store):
    seed(store)
    assert "schedule often disabled" in cli(db_url, "disable", "often").stdout
    assert "already disabled" in cli(db_url, "disable", "often").stdout
    listed = {s["name"]: s for s in json.loads(cli(db_url, "--json").stdout)}
    assert listed["often"]["enabled"] is False and listed["often"]["state"] == "disabled"
    assert "disabled" in cli(db_url).stdout
    assert rows.upcoming(store, ["reports"])[0].name == "nightly", "a disabled schedule is never due"

    before = store.now_ms()
    assert "schedule often enabled" in cli(db_url, "enable", "often").stdout
    often = {s["name"]: s for s in json.loads(cli(db_url, "--json").stdout)}["often"]
    assert often["enabled"] is True and often["next_fire_ms"] > before, "enable skips the ticks missed meanwhile"

    missing = cli(db_url, "enable", "nope", check=False)
    assert missing.exit_code == 2 and "no schedule named 'nope'" in missing.stderr


def test_a_schedule_removed_from_code_is_listed_as_such(db_url, store):
    seed(store)
    rows.sync(store, [Schedule("nightly", "reports", "0 3 * * *", "[]")], ["reports"], next_tick_ms)
    listed = {s["name"]: s for s in json.loads(cli(db_url, "--json").stdout)}
    assert listed["often"]["defined"] is False and listed["often"]["state"] == "removed from code"
    assert "removed from code" in cli(db_url).stdout
