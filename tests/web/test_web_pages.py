"""The HTML pages over a seeded SQLite store: what an on-call engineer sees."""

from __future__ import annotations

import re

import pytest
import rt_app
import web_support

from ductline.dsl import pipeline as pipeline_module


def test_overview_counts_runs_and_jobs_and_makes_halted_stand_out(client, seeded):
    page = client.get("/")
    assert page.status_code == 200
    html = page.text
    halted = re.search(r'<a class="stat c-halted([^"]*)"[^>]*>\s*<span class="num">(\d+)</span>', html)
    assert halted is not None and halted.group(2) == "1" and "alert" in halted.group(1)
    failed = re.search(r'<a class="stat c-failed([^"]*)"[^>]*>\s*<span class="num">(\d+)</span>', html)
    assert failed is not None and failed.group(2) == "0" and "alert" not in failed.group(1)
    assert 'href="/runs?status=halted"' in html
    jobs = dict(re.findall(r'data-jobs="(\w+)"><span class="num">(\d+)</span>', html))
    # ready: the halted run's on_halt handler and the third expanded element; delayed: one start.
    assert jobs == {"ready": "2", "delayed": "1", "running": "1"}
    assert 'data-worker="web-test-worker"' in html and "badge h-healthy" in html
    assert seeded["halted"] in html  # listed under "Needs attention"
    assert "Read-only" not in html and "Log in" in html


def test_runs_list_newest_first_with_filters(client, seeded):
    html = client.get("/runs").text
    order = re.findall(r'data-run="(\w+)"', html)
    assert order == [seeded["delayed"], seeded["running"], seeded["halted"], seeded["completed"]]
    assert re.findall(r'data-run="(\w+)"', client.get("/runs?status=halted").text) == [seeded["halted"]]
    chain = client.get("/runs?pipeline=rt_chain").text
    assert re.findall(r'data-run="(\w+)"', chain) == [seeded["delayed"], seeded["completed"]]
    both = client.get("/runs?pipeline=rt_chain&status=completed").text
    assert re.findall(r'data-run="(\w+)"', both) == [seeded["completed"]]
    assert "No runs match" in client.get("/runs?pipeline=nope").text


def test_runs_list_refuses_an_unknown_status_with_a_clear_message(client, seeded):
    page = client.get("/runs?status=exploded")
    assert page.status_code == 400
    assert "unknown status &#39;exploded&#39;" in page.text and "halted" in page.text
    assert client.get("/runs?after=not-a-cursor").status_code == 400


def test_halted_run_page_shows_the_failed_node_the_reason_and_the_traceback(client, seeded):
    html = client.get(f"/runs/{seeded['halted']}").text
    assert re.search(r'class="node st-failed"[^>]*data-step="always_fails" data-state="failed"', html)
    assert 'data-step="never_runs" data-state="not_reached"' in html
    assert "Halted: job_retries_exhausted" in html
    assert "Step always_fails failed for good after 2 attempt(s): errored, errored" in html
    assert "Last error: ValueError: bad input" in html
    assert "<summary>traceback</summary>" in html and "Traceback (most recent call last)" in html
    assert 'data-step="__on_halt__"' in html  # the halt handler hangs below the graph
    assert "Log in</a> <span class=\"muted\">to retry or cancel" in html
    assert "data-events-url" not in html  # a halted run does not stream


def test_expanded_step_is_summarised_with_counts(client, seeded):
    html = client.get(f"/runs/{seeded['running']}").text
    node = re.search(r'data-step="slow_square" data-state="(\w+)".*?</g>', html, re.S)
    assert node is not None and node.group(1) == "running"
    assert "1/3 done" in node.group(0)
    assert re.search(r'data-step="gather" data-state="not_reached"', html)
    assert ">expand</text>" in html and ">collapse</text>" in html
    assert f'data-events-url="/api/runs/{seeded["running"]}/events?since=' in html


def test_delayed_run_page_counts_down_to_the_start(client, seeded, sqlite_store):
    html = client.get(f"/runs/{seeded['delayed']}").text
    run = sqlite_store.get_run(seeded["delayed"])
    assert f'data-until-ms="{run["not_before_ms"]}"' in html
    assert 'data-step="add_one" data-state="delayed"' in html
    assert re.search(r'<body data-now-ms="\d+"', html)


def test_run_deadline_is_shown_with_a_countdown(client, sqlite_store):
    handle = rt_app.chain.trigger(1, timeout=600, database=sqlite_store)
    web_support.claim(sqlite_store, rt_app.chain)
    run = sqlite_store.get_run(handle.id)
    html = client.get(f"/runs/{handle.id}").text
    assert f'data-until-ms="{run["deadline_ms"]}"' in html and "(600 s)" in html


def test_without_the_definition_steps_are_drawn_in_creation_order(client, seeded, monkeypatch):
    monkeypatch.delitem(pipeline_module._REGISTRY, "rt_chain")
    html = client.get(f"/runs/{seeded['completed']}").text
    steps = re.findall(r'data-step="(\w+)" data-state="(\w+)"', html)
    assert steps == [("add_one", "completed"), ("double", "completed"), ("async_square", "completed")]
    assert "is not imported here" in html
    assert html.count('class="edge guessed"') == 2


def test_unknown_run_is_a_404_page(client):
    page = client.get("/runs/no-such-run")
    assert page.status_code == 404 and "no-such-run" in page.text


def test_a_run_id_prefix_leads_to_the_run_s_page_as_in_the_cli(client, seeded):
    run_id = seeded["halted"]
    moved = client.get(f"/runs/{run_id[:8]}?all=1", follow_redirects=False)
    assert moved.status_code == 307 and moved.headers["location"] == f"/runs/{run_id}?all=1"
    assert client.get(f"/runs/{run_id[:8]}").status_code == 200
    short = client.get(f"/runs/{run_id[:5]}")
    assert short.status_code == 404 and "at least 6 characters" in short.text


def test_pages_send_a_strict_content_security_policy(client, seeded):
    page = client.get("/")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("path", ["/", "/runs"])
def test_read_only_dashboard_says_so(make_client, seeded, path):
    html = make_client(token=None).get(path).text
    assert "Read-only dashboard" in html and "Log in" not in html


def test_a_failed_runs_reason_is_the_same_in_the_api_the_runs_page_and_needs_attention(client, sqlite_store):
    # One rule decides why a run stopped (`ductline.views.run_reasons`); `ductline runs`
    # gives the same text (tests/cli/test_cli_runs_reasons.py).
    from ductline.engine import stop

    handle = rt_app.chain.trigger(1, database=sqlite_store, timeout=4)
    with sqlite_store.transaction() as tx:
        assert stop.expire(tx, rt_app.chain.definition(), handle.id)
    reason = "the run exceeded its deadline of 4 s"
    (listed,) = [r for r in client.get("/api/runs").json()["runs"] if r["run_id"] == handle.id]
    assert (listed["status"], listed["halt_reason"], listed["reason"]) == ("failed", None, reason)
    (failed_only,) = client.get("/api/runs?status=failed").json()["runs"]
    assert failed_only["reason"] == reason
    row = re.search(rf'data-run="{handle.id}">.*?</tr>', client.get("/runs").text, re.S)
    assert row is not None and f"<td>{reason}</td>" in row.group(0)
    assert "<th>reason</th>" in client.get("/runs").text
    overview = client.get("/").text
    attention = re.search(r'<h2 id="problems-h">Needs attention</h2>.*?</table>', overview, re.S)
    assert attention is not None and handle.id in attention.group(0)
    assert f"<td>{reason}</td>" in attention.group(0) and "deadline or error" not in overview


def test_a_halted_runs_reason_is_its_halt_reason_in_the_api_and_the_runs_page(client, seeded):
    (listed,) = client.get("/api/runs?status=halted").json()["runs"]
    assert listed["reason"] == listed["halt_reason"] == "job_retries_exhausted"
    row = re.search(rf'data-run="{seeded["halted"]}">.*?</tr>', client.get("/runs").text, re.S)
    assert row is not None and "<td>job_retries_exhausted</td>" in row.group(0)
