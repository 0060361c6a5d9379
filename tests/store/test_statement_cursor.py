"""PostgreSQL runs a connection's named statements on one cursor it keeps
(`ductline.store.postgres._Connection`): a failed statement leaves it usable, and
a large result is not kept once read."""

from __future__ import annotations

from typing import Iterator

import pytest
from psycopg.rows import dict_row

from ductline.errors import StoreError
from ductline.store.postgres import KEEP_RESULT_ROWS, _Connection, _Session

SQL = {"rows": "SELECT g FROM generate_series(1, %(n)s) AS g",
       "fails": "SELECT 1 / (%(n)s - %(n)s) AS never",
       "touch": "SELECT set_config('application_name', %(name)s, false) AS name"}


@pytest.fixture
def conn(pg_base_url: str) -> Iterator[_Connection]:
    c = _Connection.connect(pg_base_url, autocommit=True, row_factory=dict_row)
    yield c
    c.close()


def test_statements_share_the_connection_cursor(conn: _Connection) -> None:
    session = _Session(conn, SQL)
    assert session.fetch("rows", {"n": 3}) == [{"g": 1}, {"g": 2}, {"g": 3}]
    kept = conn.statement_cursor()
    assert session.fetch("rows", {"n": 2}) == [{"g": 1}, {"g": 2}]
    assert session.execute("touch", {"name": "x"}) == 1
    assert conn.statement_cursor() is kept


def test_a_large_result_is_not_kept_after_it_was_read(conn: _Connection) -> None:
    session = _Session(conn, SQL)
    small = conn.statement_cursor()
    rows = session.fetch("rows", {"n": KEEP_RESULT_ROWS + 1})
    assert len(rows) == KEEP_RESULT_ROWS + 1
    assert small.closed and small.pgresult is None
    assert session.fetch("rows", {"n": KEEP_RESULT_ROWS}) == [{"g": g} for g in range(1, KEEP_RESULT_ROWS + 1)]
    assert not conn.statement_cursor().closed


def test_a_failed_statement_leaves_the_cursor_usable(conn: _Connection) -> None:
    session = _Session(conn, SQL)
    with pytest.raises(StoreError, match="fails"):
        session.fetch("fails", {"n": 1})
    assert session.fetch("rows", {"n": 1}) == [{"g": 1}]
