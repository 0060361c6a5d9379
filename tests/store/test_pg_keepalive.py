"""Every PostgreSQL connection ductline opens probes an idle peer and bounds how long
sent data may go unacknowledged (`ductline.store.postgres.keepalive`): a server gone
without a reset fails a read in about a minute, not the kernel's two hours."""

from __future__ import annotations

from typing import Any

from ductline.store.postgres.keepalive import tcp_settings
from ductline.store import open_store


def _options(store: Any) -> dict[str, str]:
    with store.dialect._conn() as conn:
        return {k: str(v) for k, v in conn.info.get_parameters().items()}


def test_pooled_and_listening_connections_carry_keepalives(pg_base_url: str) -> None:
    store = open_store(pg_base_url)
    try:
        options = _options(store)
        assert options["keepalives_idle"] == "30" and options["keepalives_interval"] == "10"
        assert options["keepalives_count"] == "3" and options.get("tcp_user_timeout") == "60000"
        with store.dialect._listen_connection(pg_base_url) as listening:
            assert listening.info.get_parameters()["keepalives_idle"] == "30"
    finally:
        store.close()


def test_a_url_that_sets_one_keeps_its_own(pg_base_url: str) -> None:
    url = pg_base_url + ("&" if "?" in pg_base_url else "?") + "keepalives_idle=7"
    assert "keepalives_idle" not in tcp_settings(url)
    store = open_store(url)
    try:
        assert _options(store)["keepalives_idle"] == "7"
    finally:
        store.close()
