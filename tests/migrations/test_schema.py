"""The numbered migrations rebuild exactly ``schema.sql``, and both dialects define
the same named statements (STYLE.md: "SQL in files, schema tested against migrations")."""

from __future__ import annotations

import importlib.util
import os
import re
import sqlite3
import sys
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import psycopg
import pytest

import ductline.store.store as store_module
from ductline.errors import SchemaError
from ductline.store import migrations, open_store, queries


def _root_conftest() -> ModuleType:
    # Loaded by path: under pytest's default import mode ``import conftest`` returns
    # whichever conftest.py was imported last, not necessarily tests/conftest.py.
    name = "ductline_tests_root_conftest"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "conftest.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


conftest = _root_conftest()
DIALECTS = ("sqlite", "postgres")


def drop_pg_database(name: str) -> None:
    with psycopg.connect(conftest.PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def fresh_pg() -> Iterator[Any]:
    """``fresh_pg(name)`` creates an empty PostgreSQL database and returns its URL;
    every database made is dropped at teardown."""
    made: list[str] = []

    def make(name: str) -> str:
        made.append(name)
        return str(conftest.recreate_pg_database(name))

    yield make
    for name in made:
        drop_pg_database(name)


# -- SQLite --------------------------------------------------------------------------


def _normalize_sql(sql: str | None) -> str | None:
    return None if sql is None else re.sub(r"\s+", " ", sql).strip()


def sqlite_schema(path: Path) -> dict[str, Any]:
    conn = sqlite3.connect(path)
    try:
        master = sorted(
            (row[0], row[1], row[2], _normalize_sql(row[3]))
            for row in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                                    "WHERE name NOT LIKE 'sqlite_%'")
        )
        tables = [r[1] for r in master if r[0] == "table"]
        detail = {}
        for table in tables:
            indexes = sorted(tuple(r) for r in conn.execute(f'PRAGMA index_list("{table}")'))
            detail[table] = {
                "columns": [tuple(r) for r in conn.execute(f'PRAGMA table_info("{table}")')],
                "indexes": indexes,
                "index_columns": {ix[1]: [tuple(r) for r in conn.execute(f'PRAGMA index_xinfo("{ix[1]}")')]
                                  for ix in indexes},
                "foreign_keys": sorted(tuple(r) for r in conn.execute(f'PRAGMA foreign_key_list("{table}")')),
            }
        return {"master": master, "tables": detail}
    finally:
        conn.close()


def test_sqlite_migrations_build_exactly_schema_sql(tmp_path: Path) -> None:
    from_schema = tmp_path / "from_schema.db"
    conn = sqlite3.connect(from_schema)
    try:
        conn.executescript(queries.read("sqlite", "schema.sql"))
    finally:
        conn.close()

    migrated = tmp_path / "migrated.db"
    store = open_store(f"sqlite:///{migrated}")
    try:
        assert store.migrate() == [v for v, _ in migrations.available("sqlite")]
    finally:
        store.close()

    expected, actual = sqlite_schema(from_schema), sqlite_schema(migrated)
    assert len(expected["tables"]) >= 7
    assert actual["master"] == expected["master"]
    assert actual["tables"] == expected["tables"]


# -- PostgreSQL ----------------------------------------------------------------------


def pg_schema(url: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default, ordinal_position "
            "FROM information_schema.columns WHERE table_schema = 'public' "
            "ORDER BY table_name, ordinal_position").fetchall()
        indexes = conn.execute(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
            "ORDER BY indexname").fetchall()
        constraints = conn.execute(
            "SELECT rel.relname, con.conname, pg_get_constraintdef(con.oid) FROM pg_constraint con "
            "JOIN pg_class rel ON rel.oid = con.conrelid JOIN pg_namespace ns ON ns.oid = rel.relnamespace "
            "WHERE ns.nspname = 'public' ORDER BY rel.relname, con.conname").fetchall()
        functions = conn.execute(
            "SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid) "
            "FROM pg_proc p JOIN pg_namespace ns ON ns.oid = p.pronamespace "
            "WHERE ns.nspname = 'public' AND p.proname LIKE 'ductline%' ORDER BY 1, 2").fetchall()
        # Storage parameters (a table's fillfactor) are part of the schema too.
        options = conn.execute(
            "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace "
            "WHERE ns.nspname = 'public' AND c.reloptions IS NOT NULL ORDER BY c.relname").fetchall()
    return {"columns": columns, "indexes": indexes, "constraints": constraints, "functions": functions,
            "options": options}


def test_postgres_migrations_build_exactly_schema_sql(fresh_pg: Any) -> None:
    from_schema = fresh_pg(f"ductline_schema_a_{os.getpid()}")
    migrated = fresh_pg(f"ductline_schema_b_{os.getpid()}")
    with psycopg.connect(from_schema) as conn:
        conn.execute(queries.read("postgres", "schema.sql").encode())
    store = open_store(migrated)
    try:
        assert store.migrate() == [v for v, _ in migrations.available("postgres")]
    finally:
        store.close()

    expected, actual = pg_schema(from_schema), pg_schema(migrated)
    assert len({c[0] for c in expected["columns"]}) >= 7
    assert [f[0] for f in expected["functions"]] == ["ductline_now_ms", "ductline_ready_ranges"]
    assert ("ductline_attempts", ["fillfactor=50"]) in expected["options"]
    assert ("ductline_jobs", ["fillfactor=70"]) in expected["options"]
    for part in ("columns", "indexes", "constraints", "functions", "options"):
        assert actual[part] == expected[part], part


# -- both ----------------------------------------------------------------------------


def test_both_dialects_define_the_same_query_names() -> None:
    # What each dialect loads: the shared statements plus its own.
    names = {d: set(queries.load(d)) for d in DIALECTS}
    assert len(names["sqlite"]) >= 100, "the query files parsed to too few statements"
    assert names["sqlite"] == names["postgres"], {
        "only sqlite": sorted(names["sqlite"] - names["postgres"]),
        "only postgres": sorted(names["postgres"] - names["sqlite"]),
    }


def _query_files(dialect: str) -> set[str]:
    folder = resources.files("ductline.store").joinpath(dialect)
    return {e.name for e in folder.iterdir() if e.name.endswith("queries.sql")}


def test_every_query_file_exists_in_both_dialects_with_the_same_names() -> None:
    files = {d: _query_files(d) for d in DIALECTS}
    assert "queries.sql" in files["sqlite"]
    assert files["sqlite"] == files["postgres"]
    for filename in sorted(files["sqlite"]):
        names = {d: set(queries.parse(queries.read(d, filename))) for d in DIALECTS}
        assert names["sqlite"] == names["postgres"], (filename, {
            "only sqlite": sorted(names["sqlite"] - names["postgres"]),
            "only postgres": sorted(names["postgres"] - names["sqlite"]),
        })
    # and what the dialects actually load is the same set
    assert set(queries.load("sqlite")) == set(queries.load("postgres"))


def test_every_statement_the_store_runs_is_defined_in_both_dialects() -> None:
    # Every module of the store package (store.py, tx.py, claims.py, ...).
    folder = Path(store_module.__file__).parent
    source = "".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py")))
    used = set(re.findall(r"\.(?:fetch|execute|execute_many)\(\s*\"(\w+)\"", source))
    for pair in re.findall(r"name = \"(\w+)\" if \w+ else \"(\w+)\"", source):
        used |= set(pair)
    used.add("schema_version")  # migrations.current_version
    assert {"claim_jobs", "complete_job", "arrive_fanins", "context_insert", "context_upsert"} <= used
    for dialect in DIALECTS:
        missing = used - set(queries.load(dialect))
        assert not missing, f"{dialect} queries.sql lacks {sorted(missing)}"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_migration_is_numbered_in_sequence(dialect: str) -> None:
    versions = [v for v, _ in migrations.available(dialect)]
    assert versions == list(range(1, len(versions) + 1))
    assert migrations.latest_version(dialect) == versions[-1]


def _fresh_url(backend: str, tmp_path: Path, fresh_pg: Any) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/fresh.db"
    return str(fresh_pg(f"ductline_schema_m_{os.getpid()}"))


def test_migrate_twice_applies_nothing_the_second_time(backend: str, tmp_path: Path, fresh_pg: Any) -> None:
    store = open_store(_fresh_url(backend, tmp_path, fresh_pg))
    try:
        assert store.schema_version() == 0
        latest = migrations.latest_version(store.dialect.name)
        assert store.migrate() == list(range(1, latest + 1))
        assert store.schema_version() == latest
        assert store.migrate() == []
        assert store.schema_version() == latest
        # and the schema works
        assert abs(store.now_ms() - store.now_ms()) < 1000
    finally:
        store.close()


def test_migrate_refuses_a_database_newer_than_this_ductline(
        backend: str, tmp_path: Path, fresh_pg: Any) -> None:
    store = open_store(_fresh_url(backend, tmp_path, fresh_pg))
    try:
        store.migrate()
        latest = migrations.latest_version(store.dialect.name)
        store.dialect.run_script(f"INSERT INTO ductline_schema_version (version) VALUES ({latest + 1});")
        assert store.schema_version() == latest + 1
        with pytest.raises(SchemaError, match=f"version {latest + 1}"):
            store.migrate()
    finally:
        store.close()


def test_migration_8_puts_waiting_first_steps_of_runs_not_started_after_runs_under_way(
        backend: str, tmp_path: Path, fresh_pg: Any) -> None:
    # Jobs created before the claim order had phases: a waiting job of a run not yet
    # started is its first step (phase 1); the jobs of runs under way keep phase 0.
    url = _fresh_url(backend, tmp_path, fresh_pg)
    store = open_store(url)
    try:
        dialect = store.dialect
        dialect.run_script(migrations._VERSION_TABLE[dialect.name])
        for version, sql in migrations.available(dialect.name):
            if version < 8:
                dialect.run_script(sql + f"\nINSERT INTO ductline_schema_version (version) VALUES ({version});\n")
        dialect.run_script(
            "INSERT INTO ductline_runs (id, pipeline, status, args, not_before_ms, created_ms) VALUES "
            "('new', 'p', 'pending', '[]', 0, 0), ('going', 'p', 'running', '[]', 0, 0);\n"
            "INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, status, input, not_before_ms, "
            "max_retry, max_crash, retry_delay_seconds, created_ms) VALUES "
            "('new_first', 'new', 'p', 'a', '', 'pending', '[]', 0, 1, 1, 1, 0), "
            "('going_first', 'going', 'p', 'a', '', 'completed', '[]', 0, 1, 1, 1, 0), "
            "('going_next', 'going', 'p', 'b', '', 'pending', '[]', 0, 1, 1, 1, 0);")
        assert store.migrate()[0] == 8
        query = "SELECT id, phase FROM ductline_jobs ORDER BY id"
        if backend == "sqlite":
            conn = sqlite3.connect(url.removeprefix("sqlite:///"))
            try:
                rows = conn.execute(query).fetchall()
            finally:
                conn.close()
        else:
            with psycopg.connect(url) as pg:
                rows = pg.execute(query).fetchall()
        assert rows == [("going_first", 0), ("going_next", 0), ("new_first", 1)]
        assert [j.job_id for j in store.claim("w", ["p"], 1, 60_000)] == ["going_next"]
        assert [j.job_id for j in store.claim("w", ["p"], 1, 60_000)] == ["new_first"]
    finally:
        store.close()


def test_every_postgres_statement_fits_psycopg_s_parse_cache() -> None:
    """psycopg caches the parsing of a statement up to MAX_CACHED_STATEMENT_LENGTH
    bytes; a longer one (the claim was, with its comments and indentation) is parsed
    again on every execution."""
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH

    loaded = queries.load("postgres")
    too_long = {name: len(sql.encode()) for name, sql in loaded.items()
                if len(sql.encode()) > MAX_CACHED_STATEMENT_LENGTH}
    assert not too_long
    assert all("\n " not in sql and not sql.startswith(" ") for sql in loaded.values())
