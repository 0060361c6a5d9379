"""Fixtures of the acceptance tests."""

from __future__ import annotations

from typing import Iterator

import psycopg
import pytest


@pytest.fixture
def empty_pg_url(pg_base_url: str) -> Iterator[str]:
    """A PostgreSQL database with no schema at all (dropped after the test)."""
    base, _, name = pg_base_url.rpartition("/")
    empty = f"{name}_empty"
    admin = f"{base}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{empty}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{empty}"')
    yield f"{base}/{empty}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{empty}" WITH (FORCE)')
