"""Retry and cancel from the pages: only with the token, only with the session's CSRF token."""

from __future__ import annotations

import re

import pytest
import web_support
from web_support import TOKEN

from ductline.store import Store


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match is not None, "no CSRF field on the page"
    return match.group(1)


def log_in(client, next_path: str = "/") -> None:
    csrf = csrf_of(client.get("/login").text)
    answer = client.post("/login", data={"token": TOKEN, "csrf": csrf, "next": next_path}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == next_path


def test_login_refuses_a_wrong_token_and_a_missing_csrf_token(client, seeded):
    csrf = csrf_of(client.get("/login").text)
    wrong = client.post("/login", data={"token": "guess", "csrf": csrf})
    assert wrong.status_code == 401 and "not the dashboard's token" in wrong.text
    forged = client.post("/login", data={"token": TOKEN, "csrf": "made-up"})
    assert forged.status_code == 403 and "CSRF" in forged.text
    page = client.get(f"/runs/{seeded['halted']}").text
    assert 'id="retry"' not in page


def test_session_cookie_is_signed_http_only_and_same_site(client):
    header = client.get("/login").headers["set-cookie"].lower()
    assert header.startswith("ductline_dashboard=")
    assert "httponly" in header and "samesite=lax" in header
    log_in(client)
    assert TOKEN not in str(client.cookies.get("ductline_dashboard"))


def test_retry_needs_login_and_the_sessions_csrf_token(client, seeded, sqlite_store: Store):
    run_id = seeded["halted"]
    csrf = csrf_of(client.get("/login").text)
    anonymous = client.post(f"/runs/{run_id}/retry", data={"csrf": csrf}, follow_redirects=False)
    assert anonymous.status_code == 403 and "Log in" in anonymous.text
    log_in(client, f"/runs/{run_id}")
    page = client.get(f"/runs/{run_id}").text
    assert 'id="retry"' in page and 'id="cancel"' in page
    csrf = csrf_of(page)
    for bad in ({}, {"csrf": "wrong"}):
        refused = client.post(f"/runs/{run_id}/retry", data=bad, follow_redirects=False)
        assert refused.status_code == 403 and "CSRF" in refused.text
    cross_site = client.post(f"/runs/{run_id}/retry", data={"csrf": csrf}, follow_redirects=False,
                             headers={"Origin": "http://evil.example"})
    assert cross_site.status_code == 403
    assert sqlite_store.get_run(run_id)["status"] == "halted"  # nothing happened so far

    done = client.post(f"/runs/{run_id}/retry", data={"csrf": csrf}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == f"/runs/{run_id}"
    assert sqlite_store.get_run(run_id)["status"] == "running"
    page = client.get(f"/runs/{run_id}").text
    assert "Run revived" in page
    assert 'data-step="always_fails" data-state="ready"' in page


def test_retrying_a_run_that_is_not_halted_changes_nothing(client, seeded, sqlite_store: Store):
    log_in(client)
    run_id = seeded["completed"]
    csrf = csrf_of(client.get(f"/runs/{run_id}").text)
    answer = client.post(f"/runs/{run_id}/retry", data={"csrf": csrf})
    assert answer.status_code == 200 and "only a halted run can be retried" in answer.text
    assert sqlite_store.get_run(run_id)["status"] == "completed"


def test_unsafe_run_is_retried_only_when_forced(client, sqlite_store: Store):
    handle = web_support.halted_after_a_boundary(sqlite_store)
    assert sqlite_store.get_run(handle.id)["halt_reason"] == "unsafe_to_retry"
    log_in(client)
    page = client.get(f"/runs/{handle.id}").text
    assert "re-run pays_then_fails, which crossed a boundary (charged the card)" in page
    assert "boundary: charged the card" in page
    csrf = csrf_of(page)
    refused = client.post(f"/runs/{handle.id}/retry", data={"csrf": csrf})
    assert "crossed an irreversible boundary" in refused.text
    assert sqlite_store.get_run(handle.id)["status"] == "halted"
    client.post(f"/runs/{handle.id}/retry", data={"csrf": csrf, "force": "pays_then_fails"})
    assert sqlite_store.get_run(handle.id)["status"] == "running"


def test_logout_needs_csrf_and_ends_the_session(client, seeded):
    log_in(client)
    csrf = csrf_of(client.get("/").text)
    assert client.post("/logout", data={}).status_code == 403
    client.post("/logout", data={"csrf": csrf})
    assert 'id="retry"' not in client.get(f"/runs/{seeded['halted']}").text


def test_a_session_from_another_token_is_not_logged_in(make_client, seeded):
    first = make_client()
    log_in(first)
    other = make_client(token="another-token")
    other.cookies = first.cookies
    assert 'id="retry"' not in other.get(f"/runs/{seeded['halted']}").text


def test_read_only_dashboard_refuses_every_action(make_client, seeded, sqlite_store: Store):
    client = make_client(token=None)
    assert "nothing to log in to" in client.get("/login").text
    for path in (f"/runs/{seeded['halted']}/retry", f"/runs/{seeded['running']}/cancel"):
        answer = client.post(path, data={"csrf": "x"})
        assert answer.status_code == 403 and "read-only" in answer.text
    assert client.post("/login", data={"token": TOKEN, "csrf": "x"}).status_code == 403
    assert sqlite_store.get_run(seeded["halted"])["status"] == "halted"


def test_cancel_a_running_run(client, seeded, sqlite_store: Store):
    log_in(client)
    run_id = seeded["running"]
    csrf = csrf_of(client.get(f"/runs/{run_id}").text)
    answer = client.post(f"/runs/{run_id}/cancel", data={"csrf": csrf})
    assert answer.status_code == 200 and "Run cancelled" in answer.text
    assert sqlite_store.get_run(run_id)["status"] == "cancelled"
    again = client.post(f"/runs/{run_id}/cancel", data={"csrf": csrf})
    assert "Not cancelled" in again.text


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil.example", "/login"])
def test_login_never_redirects_off_the_dashboard(client, target):
    csrf = csrf_of(client.get("/login").text)
    answer = client.post("/login", data={"token": TOKEN, "csrf": csrf, "next": target}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/"
