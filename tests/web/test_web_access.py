"""Who may reach the dashboard: only allowed ``Host`` names (a DNS-rebinding page on
another site cannot read a dashboard bound to loopback), and, with a read token,
only readers who present it -- pages by login, the API by bearer token."""

from __future__ import annotations

import re

import pytest
from web_support import TOKEN

READ = "read-only-secret"


def test_an_unknown_host_is_refused_and_localhost_served(make_client, seeded):
    client = make_client()
    assert client.get("/").status_code == 200
    rebound = client.get(f"/api/runs/{seeded['completed']}", headers={"Host": "evil.example:8765"})
    assert rebound.status_code == 421 and "evil.example" in rebound.text
    assert seeded["completed"] not in rebound.text
    for host in ("127.0.0.1:8765", "localhost", "[::1]:8765"):
        assert client.get("/api/runs", headers={"Host": host}).status_code == 200, host
    assert client.get("/healthz", headers={"Host": "10.1.2.3:8765"}).status_code != 421  # probes


def test_allowed_hosts_can_be_added(make_client, monkeypatch):
    monkeypatch.setenv("DUCTLINE_DASHBOARD_ALLOWED_HOSTS", "dash.internal, other.internal")
    client = make_client(hosts=["10.0.0.5"])
    for host in ("dash.internal", "other.internal:443", "10.0.0.5:8765"):
        assert client.get("/api/runs", headers={"Host": host}).status_code == 200, host
    assert client.get("/api/runs", headers={"Host": "evil.example"}).status_code == 421


def test_a_read_token_guards_pages_and_api(make_client, seeded):
    client = make_client(read_token=READ)
    page = client.get(f"/runs/{seeded['completed']}", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/login?next=")
    assert client.get("/api/runs").status_code == 401
    assert client.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/api/runs", headers={"Authorization": f"Bearer {READ}"}).status_code == 200
    assert client.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    # The read token reads, and acts on nothing.
    refused = client.post(f"/api/runs/{seeded['halted']}/retry", headers={"Authorization": f"Bearer {READ}"})
    assert refused.status_code == 401


@pytest.mark.parametrize("token, can_act", [(READ, False), (TOKEN, True)], ids=["read", "act"])
def test_logging_in_with_either_token_opens_the_pages(make_client, seeded, token, can_act):
    client = make_client(read_token=READ)
    login = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', login.text).group(1)
    done = client.post("/login", data={"token": token, "csrf": csrf, "next": "/runs"}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/runs"
    page = client.get(f"/runs/{seeded['halted']}")
    assert page.status_code == 200 and seeded["halted"] in page.text
    assert ('id="retry"' in page.text) is can_act


def test_a_wrong_token_logs_nobody_in(make_client):
    client = make_client(read_token=READ)
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
    wrong = client.post("/login", data={"token": "guess", "csrf": csrf})
    assert wrong.status_code == 401 and "not one of the dashboard's tokens" in wrong.text
    assert client.get("/", follow_redirects=False).status_code == 303
