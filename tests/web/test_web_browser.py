"""The dashboard in real headless Chromium (Debian's ``chromium`` driven by Playwright):
load the overview, open a halted run, see its failed node, log in, retry, watch it finish."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from helpers import FAST_ENV, start_worker, stop_worker, wait_for, with_store
from web_support import TOKEN

from ductline.store import open_store

HERE = Path(__file__).parent
WEB_APP = str(HERE / "web_app.py")
ARTIFACTS = HERE.parents[1] / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(db_url: str, cwd: Path) -> Iterator[str]:
    """``ductline dashboard`` (uvicorn) over ``db_url`` in a subprocess: its URL."""
    port = free_port()
    env = {**os.environ, **FAST_ENV, "DUCTLINE_DASHBOARD_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "ductline", "dashboard", "--host", "127.0.0.1", "--port",
                             str(port), "--app", WEB_APP, "--database", db_url], env=env, cwd=cwd)

    def listening() -> bool:
        assert proc.poll() is None, "the dashboard exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    try:
        wait_for(listening, timeout=20, interval=0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_worker(proc)


@pytest.fixture
def dashboard_url(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A dashboard served by ``ductline dashboard`` in a subprocess: ``(url, db_url)``."""
    db_url = f"sqlite:///{tmp_path}/browser.db"
    with_store(db_url, lambda s: s.migrate())
    with serve(db_url, tmp_path) as url:
        yield url, db_url


def test_halted_run_is_retried_from_the_browser_and_finishes(dashboard_url, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    assert shutil.which("chromium") or os.path.exists(CHROMIUM), "install Debian's chromium (see .ci/run)"
    base, db_url = dashboard_url
    gate = tmp_path / "orders.gate"
    worker = start_worker(db_url, app=WEB_APP, env={"WEB_GATE_FILE": str(gate)})
    try:
        sys.path.insert(0, str(HERE))
        import web_app

        store = open_store(db_url)
        handle = web_app.gated.trigger({"id": 7}, database=store)
        assert handle.wait(90) == "halted"
        ARTIFACTS.mkdir(exist_ok=True)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))

            page.goto(base + "/")
            halted = page.locator('a.stat[data-status="halted"]')
            expect(halted.locator(".num")).to_have_text("1")
            expect(halted).to_have_class("stat c-halted alert")
            page.locator(f'a[href="/runs/{handle.id}"]').first.click()

            expect(page.locator(".run-status .badge")).to_have_text("halted")
            failed = page.locator('svg.graph g.node[data-step="open_gate"]')
            expect(failed).to_have_attribute("data-state", "failed")
            expect(page.locator('g.node[data-step="ship"]')).to_have_attribute("data-state", "not_reached")
            expect(page.locator(".reason")).to_contain_text("gate closed: orders.gate does not exist yet")
            page.screenshot(path=str(ARTIFACTS / "run_page_halted.png"), full_page=True)

            page.locator("main a.button", has_text="Log in").click()
            page.fill("#token", "wrong")
            page.click("button[type=submit]")
            expect(page.locator("[role=alert]")).to_contain_text("not the dashboard's token")
            page.fill("#token", TOKEN)
            page.click("button[type=submit]")
            expect(page.locator(".flash-ok")).to_contain_text("Logged in")
            assert page.url.endswith(f"/runs/{handle.id}")

            gate.write_text("open")
            page.click("#retry")
            expect(page.locator(".flash-ok")).to_contain_text("Run revived")
            expect(page.locator(".run-status .badge")).to_have_text("running")
            (tmp_path / "orders.gate.ship").write_text("open")  # ship may finish now
            # The page follows the run's event stream and reloads itself as it moves on.
            expect(page.locator(".run-status .badge")).to_have_text("completed", timeout=30_000)
            expect(page.locator('g.node[data-step="open_gate"]')).to_have_attribute("data-state", "completed")
            expect(page.locator('g.node[data-step="ship"]')).to_have_attribute("data-state", "completed")
            expect(page.locator("#step-open_gate")).to_contain_text("3 attempts")
            page.wait_for_load_state("load")
            page.screenshot(path=str(ARTIFACTS / "run_page.png"), full_page=True)
            page.goto(base + "/")
            page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)
            assert errors == []
            browser.close()
        assert handle.status() == "completed"
        assert handle.output() == {"order": {"id": 7}, "gate": "open", "shipped": True}
        store.close()
    finally:
        stop_worker(worker)


def test_the_charts_render_as_svg_with_their_series_under_the_strict_policy(tmp_path):
    """The charts page in Chromium: five SVG charts drawn on the server, each with its
    series (a path through the minutes that had activity), axis labels and tooltips,
    the pipeline filter, and no Content-Security-Policy violation."""
    from playwright.sync_api import expect, sync_playwright
    from test_web_charts import rows
    from web_support import Raw

    from ductline.web.charts import MINUTE_MS

    db_url = f"sqlite:///{tmp_path}/charts.db"
    store = open_store(db_url)
    store.migrate()
    now = store.now_ms()
    store.close()
    day_end = now - now % (10 * MINUTE_MS)  # the day's charts end on ten minutes
    for minutes_ago in (20, 30, 40):  # within the hour, and in the day's window
        rows(Raw("sqlite", db_url), day_end - minutes_ago * MINUTE_MS, prefix=f"m{minutes_ago}-")
    # Written before the dashboard starts: it summarises minutes that are over once.
    with serve(db_url, tmp_path) as base:
        ARTIFACTS.mkdir(exist_ok=True)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            problems: list[str] = []
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            page.on("console", lambda msg: problems.append(msg.text) if msg.type in ("error", "warning") else None)
            page.goto(base + "/charts")
            charts = page.locator("svg.chart")
            expect(charts).to_have_count(5)
            for key, series in (("runs", ("finished", "failed", "halted")), ("failures", ("free", "paid")),
                                ("queue", ("ready", "delayed")), ("lateness", ("p50", "p95", "p99")),
                                ("duration", ("p50", "p95", "p99"))):
                chart = page.locator(f'figure[data-chart="{key}"] svg.chart')
                for name in series:
                    group = chart.locator(f'g.series[data-series="{name}"]')
                    expect(group).to_have_count(1)
                box = chart.bounding_box()
                assert box is not None and box["width"] > 300 and box["height"] > 120, key
            # The runs finished: a path through the three minutes with activity, drawn visible.
            finished = page.locator('figure[data-chart="runs"] g.series[data-series="finished"]')
            expect(finished).to_have_attribute("data-points", "60")
            line = finished.locator("path.line")
            assert line.evaluate("el => el.getTotalLength()") > 300
            assert line.evaluate("el => getComputedStyle(el).stroke") != "none"
            paid = page.locator('figure[data-chart="failures"] g.series[data-series="paid"] circle.mark title')
            assert any("paid: 1" in t for t in paid.all_text_contents())
            expect(page.locator(".totals")).to_contain_text("6 runs finished")
            expect(page.locator("svg.chart text.x-tick").first).to_have_text(re.compile(r"^\d\d:\d\d$"))
            page.screenshot(path=str(ARTIFACTS / "charts_hour.png"), full_page=True)

            page.select_option("select[name=window]", "day")
            page.select_option("select[name=pipeline]", "beta")
            page.click("form.filters button[type=submit]")
            expect(page.locator("h1")).to_have_text("Charts · last day · beta")
            expect(page.locator('figure[data-chart="runs"] g.series[data-series="finished"]')).to_have_attribute(
                "data-points", "144")
            expect(page.locator(".totals")).to_contain_text("3 runs finished, 0 failed, 3 halted")
            page.screenshot(path=str(ARTIFACTS / "charts_day_beta.png"), full_page=True)

            page.goto(base + "/")
            expect(page.locator("#failed-paid")).to_have_text("3")
            expect(page.locator('figure[data-chart="runs"] svg.chart')).to_have_count(1)
            assert problems == [], problems
            browser.close()

