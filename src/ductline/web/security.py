"""Who may act: the dashboard token, the signed session that remembers it, CSRF.

Actions (retry, cancel, starting runs) need the token in ``DUCTLINE_DASHBOARD_TOKEN``.
A browser sends it once, to the login form; the session cookie (signed, HttpOnly,
SameSite=Lax) then holds a fingerprint of it, never the token itself. Every form
that changes something carries the session's CSRF token, checked on POST, and a
cross-origin ``Origin`` is refused as well. Scripts send ``Authorization: Bearer``.
Without the environment variable the dashboard is read-only.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass

from starlette.requests import Request

TOKEN_ENV = "DUCTLINE_DASHBOARD_TOKEN"
SESSION_COOKIE = "ductline_dashboard"
SESSION_MAX_AGE_SECONDS = 12 * 3600


@dataclass(frozen=True, slots=True)
class Access:
    """The dashboard's token, or ``None`` for a read-only dashboard."""

    token: str | None

    @classmethod
    def from_env(cls) -> "Access":
        return cls(os.environ.get(TOKEN_ENV) or None)

    @property
    def enabled(self) -> bool:
        return self.token is not None

    def _mac(self, purpose: str) -> str:
        assert self.token is not None
        return hmac.new(self.token.encode(), purpose.encode(), hashlib.sha256).hexdigest()

    def fingerprint(self) -> str:
        """What a logged-in session stores: changing the token logs everybody out."""
        return self._mac("ductline dashboard session")

    def session_secret(self) -> str:
        """The key that signs session cookies: derived from the token, so sessions
        survive a restart; random for a read-only dashboard (no session matters)."""
        return self._mac("ductline dashboard cookie signing") if self.enabled else secrets.token_hex(32)

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
