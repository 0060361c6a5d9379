"""Starting a run from the JSON API: the request body, checked before anything is written.

Body (every field optional)::

    {"args": [...], "delay": 30, "delay_until": "2030-01-01T09:00:00+00:00", "timeout": 3600,
     "key": "order-42", "priority": 10, "tags": {"customer": "acme"}}

``delay`` and ``timeout`` are whole seconds (`ductline.durations`: a duration is an int
number of seconds); ``tags`` an object of string values (`ductline.model.tags`); ``delay_until`` is ISO 8601 with a UTC offset; ``timeout`` is the run
deadline; ``key`` is an idempotency key (1 to 1000 characters without NUL or lone surrogates) and
``priority`` the run's priority (an integer from -100 to 100), as for
`Pipeline.trigger`. Then `Pipeline.trigger` applies the same rules as in Python (the
JSON rule for arguments, no past ``delay_until``) and writes nothing when it refuses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ductline.dsl.options import MAX_PRIORITY, MIN_PRIORITY
from ductline.model.tags import check_tags
from ductline.operations.trigger import check_key

FIELDS = ("args", "delay", "delay_until", "timeout", "key", "priority", "tags")
MAX_BODY_BYTES = 1_048_576


class BadStart(ValueError):
    """The request cannot start a run; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class StartRequest:
    args: list[Any] = field(default_factory=list)
    delay: int | None = None
    delay_until: datetime | None = None
    timeout: int | None = None
    key: str | None = None
    priority: int | None = None
    tags: dict[str, str] = field(default_factory=dict)


def _seconds(body: dict[str, Any], name: str, *, minimum: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadStart(f"{name} must be a whole number of seconds (a JSON integer), "
                       f"got {json.dumps(value)[:60]}")
    if value < minimum:
        raise BadStart(f"{name} must be at least {minimum} second{'s' if minimum != 1 else ''}, got {value}")
    return value


def _key(body: dict[str, Any]) -> str | None:
    value = body.get("key")
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadStart(f"key must be a JSON string, got {json.dumps(value)[:60]}")
    try:
        return check_key(value)
    except ValueError as exc:
        raise BadStart(str(exc)) from None


def _priority(body: dict[str, Any]) -> int | None:
    value = body.get("priority")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadStart(f"priority must be a whole number from {MIN_PRIORITY} to {MAX_PRIORITY} "
                       f"(a JSON integer), got {json.dumps(value)[:60]}")
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise BadStart(f"priority must be from {MIN_PRIORITY} to {MAX_PRIORITY}, got {value}")
    return value


def _tags(body: dict[str, Any]) -> dict[str, str]:
    value = body.get("tags")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadStart(f"tags must be a JSON object of string values, got {json.dumps(value)[:60]}")
    try:
        return dict(check_tags(value))
    except (TypeError, ValueError) as exc:
        raise BadStart(str(exc)) from None


def parse(raw: bytes) -> StartRequest:
    """Check a start-run body.

    Raises:
        BadStart: 413 for a body over 1 MiB, 400 for a body that is not a JSON object,
            422 for a field with the wrong type or value, or an unknown field.
    """
    if len(raw) > MAX_BODY_BYTES:
        raise BadStart(f"request body is {len(raw)} bytes; the limit is {MAX_BODY_BYTES}", 413)
    if not raw.strip():
        return StartRequest()
    try:
        body = json.loads(raw.decode("utf-8"))  # RFC 8259: JSON between systems is UTF-8
    except UnicodeDecodeError:
        raise BadStart("request body is not UTF-8 text", 400) from None
    except ValueError as exc:
        raise BadStart(f"request body is not valid JSON: {exc}", 400) from None
    if not isinstance(body, dict):
        raise BadStart(f"request body must be a JSON object, got {type(body).__name__}", 400)
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise BadStart(f"unknown field(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(FIELDS)}")
    args = body.get("args", [])
    if args is None:
        args = []
    if not isinstance(args, list):
        raise BadStart(f"args must be a JSON list of the first step's arguments, got {type(args).__name__}")
    delay = _seconds(body, "delay", minimum=0)
    timeout = _seconds(body, "timeout", minimum=1)
    when = body.get("delay_until")
    delay_until = None
    if when is not None:
        if not isinstance(when, str):
            raise BadStart("delay_until must be an ISO 8601 string with a UTC offset, "
                           f"e.g. 2030-01-01T09:00:00+00:00; got {json.dumps(when)[:60]}")
        try:
            delay_until = datetime.fromisoformat(when)
        except ValueError:
            raise BadStart(f"delay_until {when[:60]!r} is not ISO 8601 "
                           "(e.g. 2030-01-01T09:00:00+00:00)") from None
        if delay_until.tzinfo is None or delay_until.utcoffset() is None:
            raise BadStart(f"delay_until {when[:60]!r} has no UTC offset; add one, e.g. +00:00 or Z")
    if delay is not None and delay_until is not None:
        raise BadStart("give delay or delay_until, not both")
    return StartRequest(args, delay, delay_until, timeout, _key(body), _priority(body), _tags(body))
