"""Step logs on the dashboard: the API's run and logs endpoints, and each attempt's
records on the run page in real headless Chromium."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from helpers import FAST_ENV, start_worker, stop_worker, wait_for

from ductline.store import open_store

HERE = Path(__file__).parent
LOG_APP = str(HERE.parent / "apps" / "log_app.py")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _completed_run(db_url):
    import log_app

    store = open_store(db_url)
    store.migrate()
    worker = start_worker(db_url, app=LOG_APP, concurrency=1)
    try:
        handle = log_app.retrying.trigger(4, database=store)
        assert handle.wait(60) == "completed"
    finally:
        stop_worker(worker)
    return store, handle.id


def test_the_api_gives_each_attempts_logs(tmp_path):
    from starlette.testclient import TestClient

    from ductline.web import create_app

    store, run_id = _completed_run(f"sqlite:///{tmp_path}/api.db")
    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        attempts = client.get(f"/api/runs/{run_id}").json()["steps"][0]["attempts"]
        assert [[e["message"] for e in a["logs"]] for a in attempts] == [["attempt 1 here"], ["attempt 2 here"]]
        logs = client.get(f"/api/runs/{run_id}/logs", params={"step": "flaky"}).json()["logs"]
        assert [(e["step"], e["attempt"], e["level"], e["logger"], e["message"]) for e in logs] == [
            ("flaky", 1, "INFO", "stdout", "attempt 1 here"), ("flaky", 2, "INFO", "stdout", "attempt 2 here")]
        assert client.get(f"/api/runs/{run_id}/logs", params={"step": "other"}).json() == {"logs": []}
        assert client.get("/api/runs/no-such-run/logs").status_code == 404
    store.close()


def test_the_run_page_shows_each_attempts_logs(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    db_url = f"sqlite:///{tmp_path}/page.db"
    store, run_id = _completed_run(db_url)
    store.close()
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ductline", "dashboard", "--host", "127.0.0.1", "--port",
                             str(port), "--app", LOG_APP, "--database", db_url],
                            env={**os.environ, **FAST_ENV}, cwd=tmp_path)

    def listening() -> bool:
        assert proc.poll() is None, "the dashboard exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    try:
        wait_for(listening, timeout=20, interval=0.05)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/runs/{run_id}")
            logs = page.locator("tr.attempt-logs details")
            expect(logs).to_have_count(2)
            expect(logs.nth(0).locator("summary")).to_have_text("log · 1 record(s)")
            expect(logs.nth(0).locator("pre")).not_to_be_visible()
            logs.nth(1).locator("summary").click()
            expect(logs.nth(1).locator("pre")).to_be_visible()
            expect(logs.nth(1).locator("pre")).to_contain_text("INFO stdout: attempt 2 here")
            browser.close()
    finally:
        stop_worker(proc)


def test_an_expanded_steps_elements_show_their_logs(tmp_path):
    from starlette.testclient import TestClient

    import log_app
    from ductline.web import create_app

    db_url = f"sqlite:///{tmp_path}/expand.db"
    store = open_store(db_url)
    store.migrate()
    worker = start_worker(db_url, app=LOG_APP, concurrency=1)
    try:
        handle = log_app.fanned.trigger(3, database=store)
        assert handle.wait(60) == "completed"
    finally:
        stop_worker(worker)
    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        page = client.get(f"/runs/{handle.id}").text
    for n in range(3):
        assert f"INFO stdout: element {n}" in page
    assert page.count("log of attempt 1 · 1 record(s)") == 3
    store.close()
