"""Run tags: written with the run by trigger, trigger_many, the CLI and the API; runs
found by tag (every tag must match) from Python, the CLI, the API and the dashboard;
limits refused before anything is written; pruned with their run. Both backends."""

from __future__ import annotations

import json
import subprocess

import pytest
import rt_app
from helpers import APP, ductline_in_process
from starlette.testclient import TestClient

from ductline.model import tags as tag_rules
from ductline.model.tags import check_filter
from ductline.store import tags as run_tags
from ductline.views import run_view
from ductline.web import create_app

TOKEN = "tags-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def ids(rows) -> list[str]:
    return [r["id"] for r in rows]


def test_trigger_writes_tags_and_runs_are_found_by_all_of_them(store):
    a = rt_app.chain.trigger(1, database=store, tags={"customer": "acme", "region": "eu"})
    b = rt_app.chain.trigger(2, database=store, tags={"customer": "acme", "region": "us"})
    c = rt_app.chain.trigger(3, database=store, tags={"customer": "globex"})
    d = rt_app.chain.trigger(4, database=store)
    assert run_view(store, a.id)["tags"] == {"customer": "acme", "region": "eu"}
    assert run_view(store, d.id)["tags"] == {}
    assert ids(store.list_runs(tags=check_filter([("customer", "acme")]))) == [b.id, a.id]
    assert ids(store.list_runs(tags=check_filter([("customer", "acme"), ("region", "eu")]))) == [a.id]
    assert ids(store.list_runs(tags=check_filter([("region", "eu"), ("customer", "globex")]))) == []
    assert ids(store.list_runs(tags=check_filter([("customer", "globex")]))) == [c.id]
    assert ids(store.list_runs(status="pending", pipeline="rt_chain",
                               tags=check_filter([("customer", "acme")]), limit=1)) == [b.id]
    assert ids(store.list_runs(pipeline="other", tags=check_filter([("customer", "acme")]))) == []


def test_trigger_many_tags_every_run_of_the_call(store):
    handles = rt_app.chain.trigger_many([1, 2, 3], database=store, tags={"batch": "b-7"})
    assert sorted(ids(store.list_runs(tags=(("batch", "b-7"),)))) == sorted(h.id for h in handles)


def test_the_tag_listing_reads_the_key_value_index(db_url, store):
    """The first tag's candidates come from the (key, value) index, not a scan."""
    from ductline.store import queries

    rt_app.chain.trigger(1, database=store, tags={"customer": "acme"})
    params = {"key": "customer", "value": "acme", "tags": "[]", "status": None, "pipeline": None,
              "created_ms": 2 ** 62, "id": "", "limit": 51}
    sql = queries.load(store.dialect.name)["tagged_runs_older"]
    if store.dialect.name == "sqlite":
        import sqlite3

        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        plan = " | ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
        conn.close()
    else:
        import psycopg

        with psycopg.connect(db_url) as conn:
            conn.execute("SET enable_seqscan = off")  # a tiny table: ask what the planner can use
            plan = " | ".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))
    assert "ductline_run_tags_lookup" in plan, plan


@pytest.mark.parametrize("tags, error, words", [
    ({"k": 1}, TypeError, "must be a str"),
    ({1: "v"}, TypeError, "must be a str"),
    ("customer=acme", TypeError, "dict"),
    ({"": "v"}, ValueError, "1 to 64"),
    ({"k" * 65: "v"}, ValueError, "1 to 64"),
    ({"a b": "v"}, ValueError, "letters, digits"),
    ({"k=v": "v"}, ValueError, "letters, digits"),
    ({"k": "v" * 257}, ValueError, "at most 256"),
    ({"k": "a\x00b"}, ValueError, "NUL"),
    ({"k": "a\ud800"}, ValueError, "lone surrogates"),
    ({f"k{i}": "v" for i in range(21)}, ValueError, "at most 20 tags"),
])
def test_bad_tags_are_refused_naming_the_limit_and_nothing_is_written(store, tags, error, words):
    with pytest.raises(error, match=words):
        rt_app.chain.trigger(1, database=store, tags=tags)
    with pytest.raises(error, match=words):
        rt_app.chain.trigger_many([1, 2], database=store, tags=tags)
    assert store.list_runs() == []
    with store.dialect.reader() as s:
        assert s.fetch("run_tags", {"run_id": "x"}) == []


def test_limits_at_their_edges_are_accepted(store):
    tags = {f"k{i}": "v" * 256 for i in range(19)} | {"k" * 64: ""}
    run = rt_app.chain.trigger(1, database=store, tags=tags)
    assert run_view(store, run.id)["tags"] == dict(sorted(tags.items()))


def test_a_held_key_writes_no_tags(store):
    first = rt_app.chain.trigger(1, database=store, key="k", tags={"a": "1"})
    again = rt_app.chain.trigger(1, database=store, key="k", tags={"a": "2", "b": "x"})
    assert again.id == first.id and not again.created
    assert run_tags.of_run(store.dialect, first.id) == {"a": "1"}
    assert store.list_runs(tags=(("b", "x"),)) == []


def test_filters_are_checked():
    assert check_filter([("b", "2"), ("a", "1"), ("a", "1")]) == (("a", "1"), ("b", "2"))
    with pytest.raises(ValueError, match="two values"):
        check_filter([("a", "1"), ("a", "2")])
    assert tag_rules.parse_tag("url=a=b") == ("url", "a=b")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        tag_rules.parse_tag("novalue")


def test_prune_deletes_a_runs_tags(store):
    from ductline.operations.prune import prune

    run = rt_app.chain.trigger(1, database=store, tags={"customer": "acme"})
    run.cancel()
    prune(store, 0, statuses=["cancelled"])
    assert store.get_run(run.id) is None
    with store.dialect.reader() as s:
        assert s.fetch("run_tags", {"run_id": run.id}) == []


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    # What the commands print and exit with: run by the command line's entry point in
    # this process (no interpreter start per command).
    return ductline_in_process(*args)


def test_cli_trigger_runs_and_show(db_url, store):
    done = cli("trigger", f"{APP}:chain", "--args", "[3]", "--tag", "customer=acme", "--tag", "tier=gold",
               "--json", "--database", db_url)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    rt_app.chain.trigger(1, database=store, tags={"customer": "acme"})
    listed = cli("runs", "--tag", "customer=acme", "--tag", "tier=gold", "--json", "--database", db_url)
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [run_id], listed.stderr
    assert len(json.loads(cli("runs", "--tag", "customer=acme", "--json", "--database", db_url).stdout)) == 2
    shown = cli("show", run_id, "--database", db_url)
    assert "tags: customer=acme tier=gold" in shown.stdout
    assert json.loads(cli("show", run_id, "--json", "--database", db_url).stdout)["tags"] == {
        "customer": "acme", "tier": "gold"}
    forged = rt_app.chain.trigger(1, database=store, tags={"note": "x\nFAKE: run completed"})
    shown = cli("show", forged.id, "--database", db_url).stdout
    assert "tags: note=x\\nFAKE: run completed" in shown
    assert not any(line.startswith("FAKE") for line in shown.splitlines())
    bad = cli("trigger", f"{APP}:chain", "--args", "[3]", "--tag", "no-equals", "--database", db_url)
    assert bad.returncode != 0 and "KEY=VALUE" in bad.stderr
    long = cli("trigger", f"{APP}:chain", "--args", "[3]", "--tag", "k=" + "v" * 300, "--database", db_url)
    assert long.returncode != 0 and "256" in long.stderr
    assert len(store.list_runs()) == 3


@pytest.fixture
def client(store, monkeypatch):
    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    with TestClient(create_app(store, token=TOKEN, poll_seconds=0.05), base_url="http://localhost") as c:
        yield c


def test_api_start_filter_and_show(client, store):
    made = client.post("/api/pipelines/rt_chain/runs", json={"args": [1], "tags": {"customer": "acme"}},
                       headers=AUTH)
    assert made.status_code == 201, made.text
    run_id = made.json()["run_id"]
    other = rt_app.chain.trigger(2, database=store, tags={"customer": "acme", "tier": "gold"})
    assert client.get(f"/api/runs/{run_id}").json()["tags"] == {"customer": "acme"}
    listed = client.get("/api/runs", params=[("tag", "customer=acme")]).json()
    assert [r["run_id"] for r in listed["runs"]] == [other.id, run_id]
    both = client.get("/api/runs", params=[("tag", "customer=acme"), ("tag", "tier=gold")]).json()
    assert [r["run_id"] for r in both["runs"]] == [other.id]
    paged = client.get("/api/runs", params=[("tag", "customer=acme"), ("limit", "1")]).json()
    assert [r["run_id"] for r in paged["runs"]] == [other.id]
    older = client.get("/api/runs", params=[("tag", "customer=acme"), ("limit", "1"),
                                            ("after", paged["next_cursor"])]).json()
    assert [r["run_id"] for r in older["runs"]] == [run_id]
    assert client.get("/api/runs", params=[("tag", "bad")]).status_code == 400
    # every list names the definition a run follows, as show does
    fingerprint = client.get(f"/api/runs/{run_id}").json()["definition"]
    assert fingerprint and all(r["definition"] == fingerprint for r in client.get("/api/runs").json()["runs"])
    assert all(r["definition"] == fingerprint for r in listed["runs"])
    assert all(r["definition"] == fingerprint for r in store.list_runs(tags=(("customer", "acme"),)))
    refused = client.post("/api/pipelines/rt_chain/runs", json={"args": [1], "tags": {"k": 5}}, headers=AUTH)
    assert refused.status_code == 422 and "str" in refused.text
    refused = client.post("/api/pipelines/rt_chain/runs", json={"args": [1], "tags": ["k"]}, headers=AUTH)
    assert refused.status_code == 422
    assert len(store.list_runs()) == 2


def test_dashboard_filter_and_run_page(client, store):
    tagged = rt_app.chain.trigger(1, database=store, tags={"customer": "acme"})
    plain = rt_app.chain.trigger(2, database=store)
    page = client.get("/runs", params={"tag": "customer=acme"})
    assert page.status_code == 200
    assert tagged.id in page.text and plain.id not in page.text
    assert 'value="customer=acme"' in page.text
    run_page = client.get(f"/runs/{tagged.id}")
    assert "customer=acme" in run_page.text and "/runs?tag=customer%3Dacme" in run_page.text
