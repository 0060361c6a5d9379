"""The JSON rule for arguments and outputs (DESIGN.md, "Bad input gets a clear error").

A value either round-trips exactly or is refused with `TypeError`; it is never
silently turned into a string. Accepted: ``None``, ``bool``, ``int``, finite
``float``, ``str``, ``list`` and ``dict`` with ``str`` keys, nested; plus one richer
type encoded with a documented tag: a timezone-aware ``datetime.datetime`` becomes
``{"__ductline__": "datetime", "value": "<ISO 8601>"}``. Refused: tuples (they
would come back as lists), sets, bytes, ``Decimal``, NaN and infinities, naive
datetimes, dicts with non-``str`` keys, and dicts that use the reserved key
``"__ductline__"``.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

_TAG = "__ductline__"


_MAX_INT_DIGITS = 4300  # CPython's int <-> str conversion limit


def _encode(value: Any, path: str, seen: frozenset[int] = frozenset()) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if value.bit_length() > _MAX_INT_DIGITS * 3:  # about 4300 decimal digits
            raise TypeError(f"{path}: int with more than {_MAX_INT_DIGITS} digits does not fit JSON text")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{path}: {value!r} is not representable in JSON")
        return value
    if isinstance(value, (list, dict)):
        if id(value) in seen:
            raise TypeError(f"{path}: the value contains itself")
        seen = seen | {id(value)}
    if isinstance(value, list):
        return [_encode(item, f"{path}[{i}]", seen) for i, item in enumerate(value)]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{path}: dict key {key!r} is not a str")
            if key == _TAG:
                raise TypeError(f"{path}: the key {_TAG!r} is reserved by ductline")
            out[key] = _encode(item, f"{path}[{key!r}]", seen)
        return out
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise TypeError(f"{path}: naive datetime {value!r}; give it a timezone")
        return {_TAG: "datetime", "value": value.isoformat()}
    hint = " (use a list)" if isinstance(value, tuple) else ""
    raise TypeError(
        f"{path}: {type(value).__name__} value {value!r:.80} does not round-trip through JSON{hint}"
    )


def _decode_hook(obj: dict[str, Any]) -> Any:
    if obj.get(_TAG) == "datetime" and len(obj) == 2:
        return datetime.fromisoformat(obj["value"])
    return obj


def dumps(value: Any, *, what: str = "value") -> str:
    """Encode a value as JSON text under the round-trip rule.

    Args:
        value: the value to encode.
        what: a name for the value used in error messages (e.g. ``"argument 0"``).

    Raises:
        TypeError: if the value would not round-trip exactly.
    """
    try:
        return json.dumps(_encode(value, what), separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise TypeError(f"{what}: nested too deeply to encode") from None


def loads(text: str | None) -> Any:
    """Decode JSON text written by `dumps` (``None`` stays ``None``)."""
    if text is None:
        return None
    return json.loads(text, object_hook=_decode_hook)


def clean_text(text: str) -> str:
    """Make free text (error messages, tracebacks) storable: NUL bytes, which
    PostgreSQL text cannot hold, are written as the four characters ``\\x00``."""
    return text.replace("\x00", "\\x00")
