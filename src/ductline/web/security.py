"""Who may act: the dashboard token, the signed session that remembers it, CSRF.

Actions (retry, cancel, starting runs) need the token in ``DUCTLINE_DASHBOARD_TOKEN``.
A browser sends it once, to the login form; the session cookie (signed, HttpOnly,
SameSite=Lax) then holds a fingerprint of it, never the token itself. Every form
that changes something carries the session's CSRF token, checked on POST, and a
cross-origin ``Origin`` is refused as well. Scripts send ``Authorization: Bearer``.
Without the environment variable the dashboard is read-only.

Reading can require a token too (``DUCTLINE_DASHBOARD_READ_TOKEN`` or ``--read-token``):
then every page and API read needs it (or the action token), by login or bearer.

Every request's ``Host`` must be one of the allowed hosts (default: the bind address
and localhost), so a page on another site that rebinds its DNS name to 127.0.0.1
cannot read a dashboard bound to loopback.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from typing import Sequence

from starlette.requests import Request

TOKEN_ENV = "DUCTLINE_DASHBOARD_TOKEN"
READ_TOKEN_ENV = "DUCTLINE_DASHBOARD_READ_TOKEN"
ALLOWED_HOSTS_ENV = "DUCTLINE_DASHBOARD_ALLOWED_HOSTS"
DEFAULT_HOSTS = ("127.0.0.1", "localhost", "::1")
# Reachable without a read token and from any Host: probes and the login form.
OPEN_PATHS = ("/login", "/static/", "/healthz", "/readyz")
SESSION_COOKIE = "ductline_dashboard"
SESSION_MAX_AGE_SECONDS = 12 * 3600


@dataclass(frozen=True, slots=True)
class Access:
    """The dashboard's action token (``None``: read-only dashboard) and its read
    token (``None``: reading needs no token)."""

    token: str | None
    read_token: str | None = None

    @classmethod
    def from_env(cls) -> "Access":
        return cls(os.environ.get(TOKEN_ENV) or None, os.environ.get(READ_TOKEN_ENV) or None)

    @property
    def enabled(self) -> bool:
        return self.token is not None

    def _mac(self, purpose: str) -> str:
        assert self.token is not None
        return hmac.new(self.token.encode(), purpose.encode(), hashlib.sha256).hexdigest()

    def fingerprint(self) -> str:
        """What a logged-in session stores: changing the token logs everybody out."""
        return self._mac("ductline dashboard session")

    def read_fingerprint(self) -> str:
        """What a session logged in with the read token stores."""
        assert self.read_token is not None
        return hmac.new(self.read_token.encode(), b"ductline dashboard read session", hashlib.sha256).hexdigest()

    def matches_read(self, given: str | None) -> bool:
        if self.read_token is None or not given:
            return False
        return hmac.compare_digest(given.encode(), self.read_token.encode())

    def may_read(self, request: Request) -> bool:
        """Whether the request may read: no read token is set, or it carries either
        token (bearer) or a session logged in with either."""
        if self.read_token is None or self.logged_in(request):
            return True
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and (self.matches(value.strip()) or self.matches_read(value.strip())):
            return True
        stored = request.session.get("read")
        return isinstance(stored, str) and hmac.compare_digest(stored, self.read_fingerprint())

    def session_secret(self) -> str:
        """The key that signs session cookies: derived from the token, so sessions
        survive a restart; random for a read-only dashboard (no session matters)."""
        if self.enabled:
            return self._mac("ductline dashboard cookie signing")
        if self.read_token is not None:
            return hmac.new(self.read_token.encode(), b"ductline dashboard cookie signing", hashlib.sha256).hexdigest()
        return secrets.token_hex(32)

    def matches(self, given: str | None) -> bool:
        """Constant-time comparison of a presented token."""
        if self.token is None or not given:
            return False
        return hmac.compare_digest(given.encode(), self.token.encode())

    def bearer(self, request: Request) -> bool:
        """Whether the request carries ``Authorization: Bearer <token>``."""
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.matches(value.strip())

    def logged_in(self, request: Request) -> bool:
        if not self.enabled:
            return False
        stored = request.session.get("auth")
        return isinstance(stored, str) and hmac.compare_digest(stored, self.fingerprint())


def csrf_token(request: Request) -> str:
    """The session's CSRF token, created on first use."""
    token = request.session.get("csrf")
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


def csrf_ok(request: Request, submitted: object) -> bool:
    """Whether a POSTed form is this session's own: its CSRF field matches the
    session's token and its ``Origin`` (when the browser sends one) is this host."""
    expected = request.session.get("csrf")
    if not isinstance(expected, str) or not isinstance(submitted, str) or not submitted:
        return False
    if not hmac.compare_digest(submitted.encode(), expected.encode()):
        return False
    origin = request.headers.get("origin")
    if origin and origin != "null":
        return origin == f"{request.url.scheme}://{request.url.netloc}"
    return True


def allowed_hosts(extra: Sequence[str] = ()) -> tuple[str, ...]:
    """The hosts requests may name: localhost, the given ones (the bind address) and
    those in ``DUCTLINE_DASHBOARD_ALLOWED_HOSTS`` (comma-separated); ``*`` allows any."""
    configured = [h.strip() for h in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",") if h.strip()]
    return tuple(dict.fromkeys([*DEFAULT_HOSTS, *extra, *configured]))


def host_of(header: str) -> str:
    """The host of a ``Host`` header, without its port (``[::1]:8765`` -> ``::1``)."""
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header
