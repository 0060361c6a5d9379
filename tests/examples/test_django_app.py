"""The Django example (examples/django_app) as it runs in production, on a small scale:
Django's development server, a ductline worker beside it importing ``shop.worker``,
and requests over HTTP. A placed order starts its fulfilment run once the order is
committed, and the run's steps update the order through the ORM; a payment declined
after the order row was written rolls back and starts nothing. One server and worker
per backend serve the module's tests, each of which looks at its own orders and runs."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from contextlib import closing
from pathlib import Path
from typing import Any, Iterator

import pytest

import helpers
from ductline.store import open_store
from helpers import FAST_ENV, stop_worker, wait_for

PROJECT = Path(__file__).resolve().parents[2] / "examples" / "django_app"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _request(url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as exc:
        with exc:
            text = exc.read()
        return exc.code, json.loads(text) if text.startswith(b"{") else text


@pytest.fixture(scope="module")
def shop_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Django's database (``shop.sqlite3``), one per module and backend."""
    return tmp_path_factory.mktemp("shop") / "shop.sqlite3"


@pytest.fixture(scope="module")
def shop(shared_backend_url: str, shop_database: Path) -> Iterator[str]:
    """The project's server and a ductline worker, both from the project's folder, on
    the module's database of each backend (`shared_backend_url`); the server's base
    URL. Django's database is `shop_database`. Each costs Django's migration and two
    interpreters that import Django: started once for the module's tests."""
    tmp_path = shop_database.parent
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("DUCTLINE_", "DJANGO_"))},
           "DUCTLINE_DATABASE_URL": shared_backend_url, "SHOP_DATABASE": str(shop_database),
           "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=PROJECT, env=env,
                   check=True, timeout=120)
    worker = subprocess.Popen([sys.executable, "-m", "ductline", "worker", "--app", "shop.worker",
                               "--concurrency", "1"], cwd=PROJECT, env={**env, **FAST_ENV})
    helpers.STARTED.append(worker)
    port = _free_port()
    with open(tmp_path / "server.log", "wb") as log:
        server = subprocess.Popen([sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
                                  cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: server.poll() is not None or _answers(base), timeout=60)
        assert server.poll() is None, (tmp_path / "server.log").read_text()
        yield base
    finally:
        server.terminate()
        server.wait(30)
        stop_worker(worker)


def _answers(base: str) -> bool:
    try:
        urllib.request.urlopen(base + "/orders/0/", timeout=5)
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code == 404
    except OSError:
        return False
    return True


def test_a_placed_order_is_fulfilled_by_its_run(shop: str, shared_backend_url: str) -> None:
    status, placed = _request(shop + "/orders/", {"item": "kettle", "quantity": 2, "card": "4242 4242 4242 4242"})
    assert status == 201, placed

    def shipped() -> Any:
        order = _request(f"{shop}/orders/{placed['order']}/")[1]
        return order if order["status"] == "shipped" else None

    order = wait_for(shipped, timeout=60)
    assert order["tracking"] == f"TRK-{placed['order']:06d}"
    store = open_store(shared_backend_url)
    try:
        run = store.get_run(order["run_id"])
        assert run is not None and run["status"] == "completed" and run["pipeline"] == "fulfil_order"
    finally:
        store.close()


def _order_items(shop_database: Path, after_id: int) -> list[str]:
    with closing(sqlite3.connect(shop_database)) as django_db:
        return [row[0] for row in django_db.execute("SELECT item FROM orders_order WHERE id > ? ORDER BY id",
                                                    (after_id,))]


def _last_order_id(shop_database: Path) -> int:
    with closing(sqlite3.connect(shop_database)) as django_db:
        return int(django_db.execute("SELECT coalesce(max(id), 0) FROM orders_order").fetchone()[0])


def _run_ids(url: str) -> set[str]:
    store = open_store(url)
    try:
        return {r["id"] for r in store.list_runs(None, None, 1000)}
    finally:
        store.close()


def test_a_declined_payment_rolls_back_the_order_and_starts_no_run(shop: str, shared_backend_url: str,
                                                                    shop_database: Path) -> None:
    # The module's other tests share the shop: this one looks at what it adds.
    last_order = _last_order_id(shop_database)
    earlier_runs = _run_ids(shared_backend_url)
    status, answer = _request(shop + "/orders/", {"item": "kettle", "quantity": 1, "card": "4000 0000 0000 0002"})
    assert status == 402, answer
    assert _request(shop + "/orders/", {"item": "kettle"})[0] == 400
    status, placed = _request(shop + "/orders/", {"item": "mug", "quantity": 1, "card": "4242 4242 4242 4242"})
    assert status == 201
    assert _order_items(shop_database, last_order) == ["mug"]  # the declined order's row was rolled back
    wait_for(lambda: _request(f"{shop}/orders/{placed['order']}/")[1]["status"] == "shipped", timeout=60)
    store = open_store(shared_backend_url)
    try:
        runs = [r for r in store.list_runs(None, None, 1000) if r["id"] not in earlier_runs]
        assert [r["pipeline"] for r in runs] == ["fulfil_order"], runs  # the declined order's never started
    finally:
        store.close()
