"""The tree of child runs where people look: `ductline show` (text and --json),
`ductline runs --parent`, the JSON API (``?parent=``, a run's ``parent`` and
``children``) and the run page's links, on both backends. The commands run by the
command line's entry point in the test process (`helpers.ductline_in_process`)."""

from __future__ import annotations

import json
import subprocess

import childruns_app as app
import pytest
from helpers import ductline_in_process
from starlette.testclient import TestClient

from ductline import views
from ductline.web import create_app


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return ductline_in_process(*args, env={"COLUMNS": "200"})


@pytest.fixture
def family(store, workers):
    workers(app=app.APP)
    handle = app.parents.trigger(2, database=store)
    assert handle.wait(90) == "completed"
    children = views.run_view(store, handle.id)["children"]
    return handle.id, [c["run_id"] for c in children]


def test_show_json_names_children_in_order_and_the_parent(store, family):
    parent, children = family
    view = views.run_view(store, parent)
    assert view["parent"] is None
    assert [(c["index"], c["pipeline"], c["step"], c["status"]) for c in view["children"]] == [
        (0, "childruns_square", "fan", "completed"), (1, "childruns_square", "fan", "completed")]
    child = views.run_view(store, children[1])
    assert child["parent"] == {"run_id": parent, "pipeline": "childruns_parent", "step": "fan", "index": 1}
    assert child["children"] == []


def test_the_cli_shows_the_tree_and_filters_runs_by_parent(store, db_url, family):
    parent, children = family
    listed = cli("runs", "--parent", parent[:10], "--json", "--database", db_url)
    assert listed.returncode == 0, listed.stderr
    assert sorted(r["run_id"] for r in json.loads(listed.stdout)) == sorted(children)
    none = cli("runs", "--parent", parent, "--status", "failed", "--json", "--database", db_url)
    assert json.loads(none.stdout) == []
    shown = cli("show", parent, "--database", db_url)
    assert shown.returncode == 0, shown.stderr
    assert all(c[:12] in shown.stdout for c in children)
    child = cli("show", children[0], "--database", db_url)
    assert f"child run 0 of run {parent} (childruns_parent, step fan)" in child.stdout
    unknown = cli("runs", "--parent", "nosuchrun", "--database", db_url)
    assert unknown.returncode != 0 and "not found" in unknown.stderr


def test_the_api_filters_by_parent_and_the_run_page_links_both_ways(store, family, monkeypatch):
    parent, children = family
    monkeypatch.delenv("DUCTLINE_DASHBOARD_TOKEN", raising=False)
    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        found = client.get("/api/runs", params={"parent": parent})
        assert found.status_code == 200
        assert sorted(r["run_id"] for r in found.json()["runs"]) == sorted(children)
        assert client.get("/api/runs", params={"parent": parent, "after": "x"}).status_code == 400
        assert client.get("/api/runs", params={"parent": "nosuchrun"}).status_code == 404
        run = client.get(f"/api/runs/{parent}").json()
        assert [c["run_id"] for c in run["children"]] == children and run["parent"] is None
        assert client.get(f"/api/runs/{children[0]}").json()["parent"]["run_id"] == parent
        page = client.get(f"/runs/{parent}").text
        assert all(f'href="/runs/{c}"' in page for c in children)
        assert f'href="/runs/{parent}"' in client.get(f"/runs/{children[0]}").text
