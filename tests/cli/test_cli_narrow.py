"""``ductline runs`` and ``ductline show`` for people, on both backends, the real
command line: at 80 columns every line fits, run ids are short unique prefixes that
every command taking a run id accepts (a prefix that names several runs is a clear
error), times are compact and nothing is cut; with room, the full tables (whole ids,
ISO 8601 UTC times). ``show`` names the root of a skipped step. The commands run by
the command line's entry point in the test process; ``ductline run`` runs as a real
process."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import cli_app
import pytest
from helpers import drive, ductline_in_process

from ductline import views
from ductline.operations.trigger import insert, prepare

HALTING = f"{cli_app.__file__}:gives_up_pipeline"
TIME = re.compile(r"^\d\d:\d\d:\d\d$")  # today's runs: the time alone, local


def ductline(db_url: str, *words: str, columns: str = "80", code: int = 0) -> str:
    """The command's standard output (its error when ``code`` is not 0), run by the
    command line's entry point in this process (`helpers.ductline_in_process`)."""
    done = ductline_in_process(*words, "--database", db_url, env={"COLUMNS": columns})
    assert done.returncode == code, done.stderr
    return done.stdout if code == 0 else done.stderr


def fits(text: str, width: int = 80) -> None:
    too_wide = [line for line in text.splitlines() if len(line) > width]
    assert not too_wide, "\n".join(too_wide)
    assert "…" not in text, text  # wrapped, never cut


def cells(text: str) -> list[list[str]]:
    """The rows of a narrow table (columns apart by two or more spaces), header and rule skipped."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if set(line.strip()) == {"─"})
    return [re.split(r"\s{2,}", line.strip()) for line in lines[rule + 1:] if line.strip()]


def with_id(store, pipeline, run_id: str, *args):
    """Trigger ``pipeline`` with a chosen run id (ids that share a prefix)."""
    ready = prepare(pipeline.definition(), args)
    ready = dataclasses.replace(ready, run=dataclasses.replace(ready.run, id=run_id),
                                job=dataclasses.replace(ready.job, run_id=run_id))
    with store.transaction() as tx:
        insert(tx, ready)
    return run_id


def test_runs_fits_80_columns_with_short_ids_every_command_accepts(store, db_url):
    long_one = cli_app.long_named.trigger(1, database=store)
    done = cli_app.chain.trigger(1, database=store)
    drive(store, cli_app.chain)
    text = ductline(db_url, "runs")
    fits(text)
    rows = cells(text)
    by_id = {row[0]: row for row in rows if re.fullmatch("[0-9a-f]{8}", row[0])}  # not a wrapped line
    assert set(by_id) == {long_one.id[:8], done.id[:8]}, rows
    assert by_id[done.id[:8]][1:3] == ["cli_chain", "completed"], rows
    assert TIME.match(by_id[done.id[:8]][3]) and by_id[done.id[:8]][4].endswith(" s"), rows
    # A long name is folded onto the next line, whole.
    after = rows[rows.index(by_id[long_one.id[:8]]) + 1]
    assert by_id[long_one.id[:8]][1] + after[0] == cli_app.long_named.name, rows
    # The prefix is what a person pastes: every command taking a run id takes it.
    assert ductline(db_url, "show", done.id[:8]).startswith(f"{done.id} cli_chain: completed")
    assert ductline(db_url, "logs", done.id[:8]) == ""
    assert ductline(db_url, "cancel", long_one.id[:8]) == f"run {long_one.id} cancelled\n"


def test_a_run_cancelled_before_it_started_took_no_time(store, db_url):
    # The narrow form's "took" is from the run's start to its end, as the dashboard's
    # runs list has it; a run cancelled while it waited to start has none (not the
    # time from its trigger to the cancel).
    waited = cli_app.chain.trigger(1, database=store)
    assert ductline(db_url, "cancel", waited.id) == f"run {waited.id} cancelled\n"
    assert store.get_run(waited.id)["started_ms"] is None
    ran = cli_app.chain.trigger(1, database=store)
    drive(store, cli_app.chain)
    rows = {row[0]: row for row in cells(ductline(db_url, "runs"))}
    assert rows[waited.id[:8]][1:3] == ["cli_chain", "cancelled"], rows
    assert len(rows[waited.id[:8]]) == 4 and TIME.match(rows[waited.id[:8]][3]), rows  # created; nothing after
    assert rows[ran.id[:8]][2] == "completed" and rows[ran.id[:8]][4].endswith(" s"), rows
    full = ductline(db_url, "runs", columns="400")  # the wide form: when it was cancelled, no duration
    assert "cancelled" in next(line for line in full.splitlines() if waited.id in line)


def test_with_room_the_full_table_has_whole_ids_and_iso_times(store, db_url):
    handle = cli_app.chain.trigger(1, database=store)
    drive(store, cli_app.chain)
    text = ductline(db_url, "runs", columns="200")
    run = store.get_run(handle.id)
    row = next(line for line in text.splitlines() if handle.id in line)
    assert views.iso(run["created_ms"]) in row and views.iso(run["finished_ms"]) in row, row


def test_prefixes_grow_until_unique_among_all_runs_not_only_those_listed(store, db_url):
    first = with_id(store, cli_app.chain, "abcdef0123" + "0" * 22, 1)
    second = with_id(store, cli_app.chain, "abcdef0124" + "0" * 22, 1)
    with_id(store, cli_app.chain, "f" * 32, 1)
    # Two runs listed out of three: the one not listed still makes the prefix longer.
    rows = cells(ductline(db_url, "runs", "--limit", "2"))
    assert [row[0] for row in rows] == ["ffffffffff", second[:10]], rows  # one length for every row
    assert views.short_ids(store, [first]) == {first: first[:10]}
    assert ductline(db_url, "show", second[:10]).startswith(second)


def test_an_ambiguous_prefix_is_a_clear_error(store, db_url):
    first = with_id(store, cli_app.chain, "abcdef0123" + "0" * 22, 1)
    second = with_id(store, cli_app.chain, "abcdef0124" + "0" * 22, 1)
    for command in ("show", "logs", "cancel", "retry", "resume"):
        said = ductline(db_url, command, "abcdef012", code=2)
        assert said == (f"error: RunNotFound: 'abcdef012' matches several runs: {first[:12]}, {second[:12]}; "
                        "give more characters\n"), said
    assert store.get_run(first)["status"] == store.get_run(second)["status"] == "pending"  # nothing done


def test_show_fits_80_columns_and_names_a_halting_error(store, db_url, tmp_path):
    done = subprocess.run([sys.executable, "-m", "ductline", "run", HALTING, "--args", "[1]", "--database", db_url],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 1, done.stderr
    run_id = store.list_runs()[0]["id"]
    text = ductline(db_url, "show", run_id[:8])
    fits(text)
    rows = cells(text)
    assert ["add_one", "completed", "1"] in rows, rows
    assert ["gives_up", "failed", "2", "RuntimeError: cannot handle 2"] in rows, rows
    failed = [row for row in rows if row[:3] == ["gives_up", "2", "errored"]]
    assert failed and TIME.match(failed[0][3]) and failed[0][4].endswith(" s"), rows
    assert f"halted: `ductline retry {run_id[:8]}` revives it" in text


def test_show_names_the_root_of_a_skipped_step(store, db_url):
    from ductline.operations.cancel import cancel_run

    handle = cli_app.branches.trigger(1, database=store)
    drive(store, cli_app.branches, skip=("branch_a", "branch_b"))  # both claimed, neither done
    cancel_run(store, handle.id)
    view = views.run_view(store, handle.id)
    [joined] = [s for s in view["steps"] if s["step"] == "joined"]
    expected = f"cancelled (root: {joined['skip_root']})"
    assert joined["skip_root"] in {"branch_a", "branch_b"}
    narrow = ductline(db_url, "show", handle.id)
    fits(narrow)
    assert ["joined", "skipped", "0", expected] in cells(narrow), narrow
    wide = ductline(db_url, "show", handle.id, columns="200")
    assert re.search(r"│ joined +│ +│ skipped +│ +│ 0 +│ +│ " + re.escape(expected) + " +│", wide), wide


@pytest.mark.parametrize(("ms", "text"), [(None, ""), (412, "0.412 s"), (12_345, "12.3 s"), (125_000, "2 min 5 s"),
                                          (3_725_000, "1 h 2 min"), (273_600_000, "3 d 4 h")])
def test_compact_durations(ms, text):
    assert views.compact_duration(ms) == text


def test_compact_times_are_local_and_drop_what_the_reader_knows():
    from datetime import datetime

    now = datetime(2026, 3, 2, 15, 0)
    at = datetime(2026, 3, 2, 14, 3, 12)
    assert views.compact_time(int(at.timestamp() * 1000), now) == "14:03:12"
    assert views.compact_time(int(datetime(2026, 1, 5, 9, 7).timestamp() * 1000), now) == "Jan 05 09:07"
    assert views.compact_time(int(datetime(2025, 12, 31, 23, 0).timestamp() * 1000), now) == "2025-12-31"
    assert views.compact_time(None, now) == ""


def test_workers_and_schedules_fit_80_columns(store, db_url):
    from ductline.dsl.schedule import Schedule, next_tick_ms
    from ductline.store import schedules as schedule_rows

    queues = ["default", "gpu", "reports.eu-west:nightly-rebuilds", "z" * 40]
    store.register_worker("a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6", "build-host-with-a-long-name.example.internal",
                          4242, 16, queues=queues)
    schedule_rows.sync(store, [Schedule("nightly_report_for_every_region", "cli_chain", "0 3 * * *", "[1]")],
                       [], next_tick_ms)
    workers = ductline(db_url, "workers")
    fits(workers)
    assert "a1b2c3d4" in workers and "0/16" in workers, workers
    # each worker's queues, one a line, wrapped rather than cut
    assert "queues" in workers, workers
    header, *lines = workers.splitlines()
    start, end = header.index("queues"), header.index("busy")
    column = "".join(line[start:end].strip() for line in lines[1:])
    assert column == "".join(queues), workers
    wide = ductline(db_url, "workers", columns="300")
    assert "default, gpu, reports.eu-west:nightly-rebuilds, " + "z" * 40 in wide, wide
    import json

    (shown,) = json.loads(ductline(db_url, "workers", "--json", columns="200"))
    assert shown["queues"] == sorted(queues)
    listed = ductline(db_url, "schedules")
    fits(listed)
    assert "0 3 * * *" in listed and "enabled" in listed, listed
    # wide, the full forms: whole ids and ISO 8601 times
    assert "a1b2c3d4e5f6" in ductline(db_url, "workers", columns="300")
    assert re.search(r"\d{4}-\d\d-\d\dT", ductline(db_url, "schedules", columns="200"))
