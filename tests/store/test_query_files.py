"""The SQL files and the rulebook agree: every set of statuses a statement uses is
rendered from `ductline.model.states` (none is spelled out), the rule that decides
pending or held follows ``waiting_status``, and a statement both dialects write
alike is written once, in ``store/shared/``."""

from __future__ import annotations

import re
import sqlite3
from enum import StrEnum

import pytest

from ductline.model import states
from ductline.model.states import AttemptResult, JobStatus, RunStatus, WorkerStatus
from ductline.store import queries

DIALECTS = queries.DIALECTS
STATUS_VALUES = {m.value for enum in (RunStatus, JobStatus, AttemptResult, WorkerStatus) for m in enum}
# Dialect files another part of the code base reads per dialect (the dashboard's and
# the metrics' read-only statements; their tests parse each dialect's file): they
# stay whole in each dialect even where a statement reads the same.
PER_DIALECT_FILES = {"web_queries.sql", "metrics_queries.sql", "chart_queries.sql"}

_QUOTED = re.compile(r"'(\w+)'")
# a list of literals: IN ('a', 'b') (not IN (SELECT ...))
_IN_LIST = re.compile(r"\bIN\s*\(\s*('[^']*'(?:\s*,\s*'[^']*')*)\s*\)", re.IGNORECASE)
_ARRAY = re.compile(r"ARRAY\s*\[([^\[\]]*)\]", re.IGNORECASE)
_STRING = re.compile(r"'(?:[^']|'')*'")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
# A CASE arm that decides a waiting job's status: WHEN <condition> THEN 'pending' ELSE 'held'.
_WAITING_CASE = re.compile(r"WHEN\s+((?:(?!\bWHEN\b).)*?)\s+THEN\s+'pending'\s+ELSE\s+'held'\s+END", re.DOTALL)


def raw_statements() -> dict[str, str]:
    """Every statement as written, unrendered: ``{"folder/file name": sql}``."""
    found: dict[str, str] = {}
    for folder in (queries.SHARED, *DIALECTS):
        for filename in queries.files(folder):
            for name, sql in queries.parse(queries.read(folder, filename)).items():
                found[f"{folder}/{filename} {name}"] = sql
    return found


def code_of(sql: str) -> str:
    """``sql`` without what its string literals say (a brace there is text)."""
    return _STRING.sub("''", sql)


def status_literals(text: str) -> list[str]:
    return [v for v in _QUOTED.findall(text) if v in STATUS_VALUES]


# -- sets of states are rendered, never spelled out ------------------------------------


def test_no_statement_spells_out_a_set_of_statuses() -> None:
    spelled: dict[str, list[str]] = {}
    for where, sql in raw_statements().items():
        lists = [m.group(1) for m in _IN_LIST.finditer(sql)] + [m.group(1) for m in _ARRAY.finditer(sql)]
        for items in lists:
            if status_literals(items):
                spelled.setdefault(where, []).append(items.strip())
        # a run of quoted statuses outside an IN list (a VALUES row, a function's arguments)
        for m in re.finditer(r"'(\w+)'\s*,\s*'(\w+)'", sql):
            if {m.group(1), m.group(2)} <= STATUS_VALUES:
                spelled.setdefault(where, []).append(m.group(0))
    assert not spelled, f"write the rulebook's set ({{UNFINISHED_RUN}}, ...) instead: {spelled}"


def test_every_placeholder_names_a_set_of_the_rulebook() -> None:
    sets = queries.state_sets()
    used = {name for sql in raw_statements().values() for name in _PLACEHOLDER.findall(code_of(sql))}
    assert used, "no statement names a set"
    assert used <= set(sets), sorted(used - set(sets))
    for name in used:  # each is a frozenset of one enum's members, declared in model/states.py
        members = sets[name]
        assert members is getattr(states, name)
        assert len({type(m) for m in members}) == 1 and all(isinstance(m, StrEnum) for m in members)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_loaded_statement_is_rendered(dialect: str) -> None:
    loaded = queries.load(dialect)
    for name, sql in loaded.items():
        code = code_of(sql)
        assert "{" not in code and "}" not in code, (name, sql)
    # and what was rendered is exactly the rulebook's set, in declaration order
    assert "status IN ('pending', 'running', 'paused', 'halted')" in loaded["due_deadlines"]
    assert queries.literal_list(states.UNFINISHED_RUN) == "'pending', 'running', 'paused', 'halted'"


def test_render_fills_a_set_and_leaves_strings_and_comments_alone() -> None:
    sql = ("UPDATE t SET m = jsonb_set(m, '{revived}', '1') -- {not a set}\n"
           "WHERE status IN ({ACTIVE_RUN}) AND j IN ({REVIVABLE_JOB})")
    assert queries.render(sql) == (
        "UPDATE t SET m = jsonb_set(m, '{revived}', '1') -- {not a set}\n"
        "WHERE status IN ('pending', 'running', 'paused') AND j IN ('held', 'failed', 'cancelled')")


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT 1 WHERE status IN ({UNFINISHED_RUNS})", "names no set"),
    ("SELECT 1 WHERE status IN ({unfinished_run})", "names no set"),
    ("SELECT 1 WHERE status IN ({RUN_TRANSITIONS})", "names no set"),
    ("SELECT 1 WHERE status IN ({ACTIVE_RUN)", "stray"),
    ("SELECT '}' WHERE x = }", "stray"),
])
def test_render_refuses_what_is_no_set_of_the_rulebook(sql: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        queries.render(sql, "test")


def test_literal_list_refuses_sets_it_cannot_render() -> None:
    with pytest.raises(ValueError, match="empty"):
        queries.literal_list(frozenset())
    with pytest.raises(ValueError, match="mixes"):
        queries.literal_list(frozenset({RunStatus.PENDING, JobStatus.HELD}))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_pending_or_held_rule_is_the_rulebook_s(dialect: str) -> None:
    """A job created 'auto', re-queued or released is pending while its run is in
    ACTIVE_RUN and held otherwise: ``waiting_status``. Every statement that decides it
    names the set, and the rendered condition gives waiting_status's answer for every
    run status (evaluated by SQLite)."""
    deciders: dict[str, list[str]] = {}
    for folder, filename in queries.sources(dialect):
        for name, sql in queries.parse(queries.read(folder, filename)).items():
            for condition in _WAITING_CASE.findall(sql):
                deciders.setdefault(name, []).append(condition)
    assert {"insert_job", "insert_jobs", "retry_job", "release_job"} <= set(deciders), deciders
    conn = sqlite3.connect(":memory:")
    try:
        for name, conditions in deciders.items():
            for condition in conditions:
                assert condition.endswith("IN ({ACTIVE_RUN})"), (name, condition)
                # the statement's own condition, on a run status given as a parameter
                listed = queries.render(condition.rpartition(" IN ")[2])
                case = f"SELECT CASE WHEN :run_status IN {listed} THEN 'pending' ELSE 'held' END"
                for run in RunStatus:
                    (got,) = conn.execute(case, {"run_status": run.value}).fetchone()
                    assert got == states.waiting_status(run).value, (name, run)
    finally:
        conn.close()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_idempotency_index_predicate_is_the_rendered_unfinished_set(dialect: str) -> None:
    """insert_run's ON CONFLICT names the partial unique index by its predicate, which
    SQLite matches as written: the rendered set must read as schema.sql's index."""
    schema = queries.read(dialect, "schema.sql")
    index = re.search(r"CREATE UNIQUE INDEX ductline_runs_idempotency\b.*?WHERE (.*?);", schema, re.DOTALL)
    assert index, "schema.sql has no ductline_runs_idempotency index"
    predicate = " ".join(index.group(1).split())
    loaded = queries.load(dialect)
    for name in ("insert_run", "insert_run_with_job"):
        if "ON CONFLICT (pipeline, idempotency_key)" not in loaded[name]:
            continue  # SQLite's insert_run_with_job is not run (Tx inserts the run, then the job)
        conflict = re.search(r"ON CONFLICT \(pipeline, idempotency_key\)\s+WHERE (.*?)\s+DO NOTHING",
                             loaded[name], re.DOTALL)
        assert conflict, loaded[name]
        assert " ".join(conflict.group(1).split()) == predicate, name
    assert predicate.endswith(f"status IN ({queries.literal_list(states.UNFINISHED_RUN)})")


# -- statements written once --------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_statement_is_defined_twice(dialect: str) -> None:
    seen: dict[str, str] = {}
    twice = []
    for folder, filename in queries.sources(dialect):
        for name in queries.parse(queries.read(folder, filename)):
            if name in seen:
                twice.append((name, seen[name], f"{folder}/{filename}"))
            seen[name] = f"{folder}/{filename}"
    assert not twice
    assert set(seen) == set(queries.load(dialect))


def test_both_dialects_load_the_same_statements_and_share_the_same_files() -> None:
    assert set(queries.load("sqlite")) == set(queries.load("postgres"))
    shared = {name for f in queries.files(queries.SHARED) for name in queries.parse(queries.read(queries.SHARED, f))}
    assert len(shared) >= 60, "the shared files parsed to too few statements"
    for dialect in DIALECTS:
        own = {name for f in queries.files(dialect) for name in queries.parse(queries.read(dialect, f))}
        assert not shared & own, (dialect, sorted(shared & own))


def test_a_statement_both_dialects_write_alike_is_shared() -> None:
    alike = []
    for filename in queries.files("sqlite"):
        if filename in PER_DIALECT_FILES:
            continue
        sqlite = queries.parse(queries.read("sqlite", filename))
        postgres = queries.parse(queries.read("postgres", filename))
        alike += [f"{filename} {name}" for name, sql in sqlite.items() if postgres.get(name) == sql]
    assert not alike, f"move these to store/{queries.SHARED}/: {alike}"


def test_the_loader_refuses_a_statement_defined_in_a_shared_file_and_a_dialect_s(
        monkeypatch: pytest.MonkeyPatch) -> None:
    files = {("shared", "queries.sql"): "-- name: now\nSELECT 1;\n",
             ("sqlite", "queries.sql"): "-- name: other\nSELECT 2;\n\n-- name: now\nSELECT 3;\n"}
    monkeypatch.setattr(queries, "sources", lambda dialect: list(files))
    monkeypatch.setattr(queries, "read", lambda folder, filename: files[(folder, filename)])
    with pytest.raises(ValueError, match=r"'now' is defined twice \(shared/queries.sql and sqlite/queries.sql\)"):
        queries.load("sqlite")
