"""Stored values shown as what they are: a type and a text, never the stored form.

Arguments and outputs are stored as JSON under the codec's rule
(`ductline.codec`): plain JSON as itself, richer values as tagged objects
(``{"__ductline__": "dataclass", "type": "app.models:User", "fields": {...}}``). The
dashboard decodes that *structure* only: it never imports a user's class (the
dashboard runs no user code), and a value it cannot read -- malformed JSON, a tag
of a newer ductline, a tag with the wrong fields -- is shown as such instead of
failing the page.

The text notation is JSON for plain values, and ``Type(text)`` for tagged ones::

    {"user": User(name="ann", joined=datetime(2030-01-02T09:00:00+00:00)),
     "pair": (1, 2), "colour": Colour("red"), "id": UUID(1b4e28ba-2fa1-11d2-883f-0016d3cca427),
     "price": Decimal(9.90), "day": date(2030-01-02)}

A dataclass or pydantic model is ``Qualname(field=value, ...)``; an enum member is
``Qualname(value)`` (what calling the class with its stored value returns); a
tuple is ``(a, b)``. The API gives the same as JSON (`api_value`): a tagged value
becomes ``{"type", "text"}`` plus its structure (``items``, ``fields`` or ``value``).

Every string that comes out is `ductline.safetext.printable` (data strings in the
API's structure: `ductline.codec.safe_text`), so no stored text can break a page
or act on a terminal, and every text is cut at a character budget.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from ductline.codec import TAG, safe_text
from ductline.safetext import printable
from ductline.store import payloads

# The most characters of a value's text on a page (a larger value is cut, with a note).
TEXT_CHARS = 20_000
# The most characters of the ``text`` of one tagged value in the API.
API_TEXT_CHARS = 2_000
# A line of pretty text holds a container whole up to this width.
WIDTH = 88
# Builtin tags and the name their values are shown with.
SCALARS = {"datetime": "datetime", "date": "date", "uuid": "UUID", "decimal": "Decimal"}
USER_KINDS = ("enum", "dataclass", "pydantic")


@dataclass(frozen=True, slots=True)
class Tagged:
    """A tagged value, decoded as structure.

    Attributes:
        tag: the codec's tag (``tuple``, ``datetime``, ``dataclass``, ...), or one
            this version does not know.
        type: ``module:Qualname`` of an enum, dataclass or pydantic model; else ``""``.
        body: the rest: ``items`` of a tuple, ``fields`` of a dataclass or model,
            ``value`` of the others (decoded likewise).
    """

    tag: str
    type: str
    body: Any

    @property
    def name(self) -> str:
        """The name shown before the text: ``datetime``, ``UUID``, ``User``."""
        if self.tag in SCALARS:
            return SCALARS[self.tag]
        if self.tag in USER_KINDS:
            return self.type.rpartition(":")[2] or self.type or f"<{self.tag} of no type>"
        return self.tag


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Stored text that is not JSON this version can read; ``why`` says what is wrong."""

    text: str
    why: str


@dataclass(frozen=True, slots=True)
class Payload:
    """An out-of-line value that was not loaded: its id and size in bytes."""

    id: str
    size: int

    @property
    def text(self) -> str:
        return f"<payload {payloads.human_size(self.size)}>"


def _hook(obj: dict[str, Any]) -> Any:
    tag = obj.get(TAG)
    if tag is None:
        return obj
    if not isinstance(tag, str):
        return Tagged(repr(tag)[:40], "", {k: v for k, v in obj.items() if k != TAG})
    if tag == "payload" and isinstance(obj.get("id"), str) and isinstance(obj.get("size"), int):
        return Payload(obj["id"], obj["size"])
    kind = obj.get("type") if tag in USER_KINDS else ""
    kind = kind if isinstance(kind, str) else repr(kind)
    if tag == "tuple" and isinstance(obj.get("items"), list):
        return Tagged(tag, "", obj["items"])
    if tag in ("dataclass", "pydantic"):
        fields = obj.get("fields" if tag == "dataclass" else "value")
        if isinstance(fields, dict):
            return Tagged(tag, kind, fields)
    elif tag in SCALARS or tag == "enum":
        if "value" in obj and (tag == "enum" or isinstance(obj["value"], str)):
            return Tagged(tag, kind, obj["value"])
    # A tag of a newer version, or one with fields this version does not expect.
    return Tagged(tag, kind, {k: v for k, v in obj.items() if k not in (TAG, "type")})


def decode(text: str | None) -> Any:
    """Stored JSON text as plain values, `Tagged` and `Payload` objects; `Unreadable`
    when it is not JSON (never raises). ``None`` stays ``None``."""
    if text is None:
        return None
    ref = payloads.parse_reference(text)
    if ref is not None:
        return Payload(ref.id, ref.size)
    try:
        return json.loads(text, object_hook=_hook)
    except (ValueError, RecursionError) as exc:
        return Unreadable(text[:TEXT_CHARS], f"{type(exc).__name__}: {exc}"[:200])


class _Budget(Exception):
    """The text reached its character budget."""


class _Writer:
    def __init__(self, limit: int) -> None:
        self.parts: list[str] = []
        self.left = limit

    def add(self, text: str) -> None:
        self.parts.append(text[:max(0, self.left)])
        self.left -= len(text)
        if self.left < 0:
            raise _Budget

    def text(self) -> str:
        return "".join(self.parts)


def _string(value: str) -> str:
    # JSON quoting escapes every control character; ensure_ascii=False keeps other scripts
    # (and lone surrogates, which the final `printable` shows as \udXXX).
    return json.dumps(value, ensure_ascii=False)


def _compact(value: Any, out: _Writer, depth: int = 0) -> None:
    if depth > 200:
        out.add("…")
        return
    if isinstance(value, str):
        out.add(_string(value))
    elif value is None or isinstance(value, (bool, int, float)):
        out.add(json.dumps(value))
    elif isinstance(value, list):
        out.add("[")
        for i, item in enumerate(value):
            if i:
                out.add(", ")
            _compact(item, out, depth + 1)
        out.add("]")
    elif isinstance(value, dict):
        out.add("{")
        for i, (key, item) in enumerate(value.items()):
            out.add(f"{', ' if i else ''}{_string(key)}: ")
            _compact(item, out, depth + 1)
        out.add("}")
    elif isinstance(value, Tagged):
        _tagged(value, out, depth)
    elif isinstance(value, Payload):
        out.add(value.text)
    elif isinstance(value, Unreadable):
        out.add(f"<unreadable: {value.why}> {value.text}")
    else:  # pragma: no cover - decode makes nothing else
        out.add(repr(value))


def _tagged(value: Tagged, out: _Writer, depth: int) -> None:
    body = value.body
    if value.tag == "tuple":
        out.add("(")
        for i, item in enumerate(body):
            if i:
                out.add(", ")
            _compact(item, out, depth + 1)
        out.add(",)" if len(body) == 1 else ")")
    elif value.tag in SCALARS and isinstance(body, str):
        out.add(f"{value.name}({body})")
    elif value.tag == "enum":
        out.add(f"{value.name}(")
        _compact(body, out, depth + 1)
        out.add(")")
    elif value.tag in ("dataclass", "pydantic") and isinstance(body, dict):
        out.add(f"{value.name}(")
        for i, (key, item) in enumerate(body.items()):
            out.add(f"{', ' if i else ''}{key}=")
            _compact(item, out, depth + 1)
        out.add(")")
    else:
        out.add(f"<{value.tag} value this version cannot read> ")
        _compact(body, out, depth + 1)


def text(value: Any, limit: int = TEXT_CHARS) -> str:
    """A decoded value (`decode`) on one line, cut at ``limit`` characters."""
    out = _Writer(limit)
    try:
        _compact(value, out)
    except _Budget:
        return printable(out.text()) + " …"
    return printable(out.text())


def _pretty(value: Any, out: _Writer, depth: int, indent: str) -> None:
    """Containers that do not fit one line of `WIDTH` are broken one element a line."""
    one = _Writer(WIDTH)
    try:
        _compact(value, one, depth)
        fits = True
    except _Budget:
        fits = False
    if fits or depth > 200:
        out.add(one.text() if fits else "…")
        return
    deeper = indent + "  "
    if isinstance(value, list) and all(_scalar(item) for item in value):
        out.add("[")  # scalars fill their lines, as pprint's compact mode does
        line = WIDTH
        for i, item in enumerate(value):
            piece = _Writer(WIDTH)
            try:
                _compact(item, piece, depth + 1)
            except _Budget:
                pass
            shown = piece.text() + ("," if i < len(value) - 1 else "")
            if line + len(shown) + 1 > WIDTH:
                out.add("\n" + deeper)
                line = len(deeper)
            elif i:
                out.add(" ")
                line += 1
            out.add(shown)
            line += len(shown)
        out.add("\n" + indent + "]")
    elif isinstance(value, list):
        out.add("[")
        for i, item in enumerate(value):
            out.add(("," if i else "") + "\n" + deeper)
            _pretty(item, out, depth + 1, deeper)
        out.add("\n" + indent + "]")
    elif isinstance(value, dict):
        out.add("{")
        for i, (key, item) in enumerate(value.items()):
            out.add(("," if i else "") + "\n" + deeper + _string(key) + ": ")
            _pretty(item, out, depth + 1, deeper)
        out.add("\n" + indent + "}")
    elif isinstance(value, Tagged) and (value.tag == "tuple" and isinstance(value.body, list)
                                        or value.tag in ("dataclass", "pydantic") and isinstance(value.body, dict)):
        tuple_ = value.tag == "tuple"
        out.add("(" if tuple_ else f"{value.name}(")
        body = value.body
        entries: list[tuple[Any, Any]] = list(enumerate(body)) if isinstance(body, list) else list(body.items())
        for i, (key, item) in enumerate(entries):
            label = "" if tuple_ else f"{key}="
            out.add(("," if i else "") + "\n" + deeper + label)
            _pretty(item, out, depth + 1, deeper)
        out.add("\n" + indent + ")")
    else:
        _compact(value, out, depth)


def _scalar(value: Any) -> bool:
    return not isinstance(value, (list, dict, Tagged)) or isinstance(value, Tagged) and value.tag in SCALARS


def pretty(value: Any, limit: int = TEXT_CHARS) -> str:
    """A decoded value laid out over lines for reading, cut at ``limit`` characters
    with a note of how much was left out."""
    out = _Writer(limit)
    try:
        _pretty(value, out, 0, "")
    except _Budget:
        return printable(out.text()) + f"\n… (cut at {limit:,} characters)"
    return printable(out.text())


def api_value(value: Any) -> Any:
    """A decoded value as JSON for the API: plain values as themselves (strings made
    storable), a tagged value as ``{"type", "text"}`` plus ``items`` (a tuple),
    ``fields`` (a dataclass or pydantic model) or ``value`` (an enum), and
    ``kind`` for the user types (``enum``, ``dataclass``, ``pydantic``). An
    out-of-line value is ``{"type": "payload", "text", "id", "size"}``; one that
    cannot be read ``{"type": "unreadable", "text", "error"}``."""
    return _api(value, 0)


def _api(value: Any, depth: int) -> Any:
    if depth > 200:
        return "…"
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # stored by hand: JSON has no such number
    if isinstance(value, list):
        return [_api(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {safe_text(k): _api(v, depth + 1) for k, v in value.items()}
    if isinstance(value, Payload):
        return {"type": "payload", "text": value.text, "id": value.id, "size": value.size}
    if isinstance(value, Unreadable):
        return {"type": "unreadable", "text": printable(value.text[:API_TEXT_CHARS]), "error": printable(value.why)}
    if isinstance(value, Tagged):
        shown: dict[str, Any] = {"type": printable(value.type or value.tag, newlines=False),
                                 "text": text(value, API_TEXT_CHARS)}
        if value.tag in USER_KINDS:
            shown["kind"] = value.tag
        elif value.tag not in SCALARS and value.tag != "tuple":
            shown["kind"] = "unknown"
        key = {"tuple": "items", "dataclass": "fields", "pydantic": "fields"}.get(value.tag, "value")
        if value.tag not in SCALARS or not isinstance(value.body, str):
            shown[key] = _api(value.body, depth + 1)
        return shown
    return value
