"""The value rule for arguments and outputs (docs/howto/payloads.md, "Values: the JSON rule"), and
the one place where text is made safe to store.

A value either round-trips with its exact type or is refused with `TypeError`
naming where it is; it is never silently turned into something else.

Plain JSON, exact types only: ``None``, ``bool``, ``int``, finite ``float``, ``str``,
``list`` and ``dict`` with ``str`` keys, nested. Subclasses (an ``IntEnum`` member
outside the enum rule, an ``OrderedDict``, a ``str`` subclass) are refused: they
would come back as their base type.

Richer values are encoded as a JSON object with a tag, ``{"__ductline__": TAG, ...}``:

======================  ==============================================================
``tuple``               ``{"__ductline__": "tuple", "items": [...]}``
aware ``datetime``      ``{"__ductline__": "datetime", "value": "<ISO 8601>"}``
``date``                ``{"__ductline__": "date", "value": "YYYY-MM-DD"}``
``UUID``                ``{"__ductline__": "uuid", "value": "<hex with dashes>"}``
``Decimal``             ``{"__ductline__": "decimal", "value": "<str(value)>"}``
``Enum`` member         ``{"__ductline__": "enum", "type": "module:Qualname", "value": <member value>}``
dataclass instance      ``{"__ductline__": "dataclass", "type": "module:Qualname", "fields": {...}}``
pydantic model          ``{"__ductline__": "pydantic", "type": "module:Qualname", "value": <model_dump(mode="json")>}``
``ChildRunFailed``      ``{"__ductline__": "child_failed", "run_id": ..., "pipeline": ..., "status": ..., ...}``
``children(...)``       ``{"__ductline__": "children", "on_failure": ..., "runs": [...]}`` (a step's return only)
======================  ==============================================================

Enums, dataclasses and pydantic models must be importable by ``module:qualname``
(defined at module level) so the process that decodes them can find the class;
a dataclass needs every field in its ``__init__``; a pydantic model must validate
its own dump back to an equal model. Refused: sets, bytes, NaN and infinities,
naive datetimes, ``time``, ``timedelta``, dicts with non-``str`` keys, and dicts
that use the reserved key ``"__ductline__"``. Decoding a tag this version does
not know (written by a newer ductline) raises `TypeError` saying so.

Text that leaves ductline for a database column or a page goes through
`safe_text`: NUL becomes the four characters ``\\x00`` and a lone surrogate (e.g.
from ``os.listdir`` of a badly encoded name) its escape ``\\udXXX``, so every stored
string is valid UTF-8 without NUL. JSON payloads need none of this: `dumps` writes
ASCII with every such character escaped, so they round-trip exactly.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import math
import sys
import uuid
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Callable

from ductline.errors import PayloadNotSerializable

TAG = "__ductline__"


def _reference(kind: type) -> str | None:
    """``module:qualname`` of a class importable by that name, else ``None``."""
    module, qualname = kind.__module__, kind.__qualname__
    if "<locals>" in qualname or module == "__main__":
        return None
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return f"{module}:{qualname}" if found is kind else None


def _resolve(reference: Any, path: str) -> type:
    if not isinstance(reference, str) or ":" not in reference:
        raise TypeError(f"{path}: malformed type reference {reference!r}")
    module, _, qualname = reference.partition(":")
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise TypeError(f"{path}: cannot import {reference} to decode a value of that type: {exc}") from None
    if not isinstance(found, type):
        raise TypeError(f"{path}: {reference} is not a class")
    return found


def _pydantic_base() -> type | None:
    try:
        from pydantic import BaseModel
    except ImportError:
        return None
    return BaseModel


def _tagged(tag: str, **fields: Any) -> dict[str, Any]:
    return {TAG: tag, **fields}


def _encode(value: Any, path: str, seen: frozenset[int] = frozenset()) -> Any:
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        limit = sys.get_int_max_str_digits()
        # A decimal digit holds 3.32 bits: an int of at most 3 bits per allowed digit fits.
        if limit and value.bit_length() > 3 * limit:
            try:
                str(value)  # exact: CPython refuses the conversion past the limit, as JSON would
            except ValueError:
                raise TypeError(f"{path}: int with more than {limit} digits does not fit JSON text "
                                "(sys.get_int_max_str_digits)") from None
        return value
    if kind is float:
        if not math.isfinite(value):
            raise TypeError(f"{path}: {value!r} is not representable in JSON")
        return value
    if kind in (list, dict, tuple) or dataclasses.is_dataclass(value):
        if id(value) in seen:
            raise TypeError(f"{path}: the value contains itself")
        seen = seen | {id(value)}
    if kind is list:
        return [_encode(item, f"{path}[{i}]", seen) for i, item in enumerate(value)]
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(f"{path}: dict key {key!r} is not a str")
            if key == TAG:
                raise TypeError(f"{path}: the key {TAG!r} is reserved by ductline")
            out[key] = _encode(item, f"{path}[{key!r}]", seen)
        return out
    if kind is tuple:
        return _tagged("tuple", items=[_encode(item, f"{path}[{i}]", seen) for i, item in enumerate(value)])
    if kind is datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise TypeError(f"{path}: naive datetime {value!r}; give it a timezone")
        return _tagged("datetime", value=value.isoformat())
    if kind is date:
        return _tagged("date", value=value.isoformat())
    if kind is uuid.UUID:
        return _tagged("uuid", value=str(value))
    if kind is Decimal:
        return _tagged("decimal", value=str(value))
    if isinstance(value, enum.Enum):
        return _tagged("enum", type=_importable(kind, path), value=_encode(value.value, f"{path}.value", seen))
    own = _own_tag(kind)
    if own is not None:  # ductline's own values (ductline.childruns): encoded with their tag
        return _tagged(own, **_encode(value.ductline_fields(), path, seen))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _dataclass(value, path, seen)
    model = _pydantic_base()
    if model is not None and isinstance(value, model):
        return _pydantic(value, path)
    return _refuse(value, path)


def _own_tags() -> dict[type, str]:
    from ductline.childruns import ChildRunFailed, ChildRuns

    return {ChildRuns: ChildRuns.__ductline_tag__, ChildRunFailed: ChildRunFailed.__ductline_tag__}


_OWN_TAGS: dict[type, str] = {}


def _own_tag(kind: type) -> str | None:
    """The tag of one of ductline's own types (imported on first use: no import cycle)."""
    if not _OWN_TAGS:
        _OWN_TAGS.update(_own_tags())
    return _OWN_TAGS.get(kind)


def _importable(kind: type, path: str) -> str:
    reference = _reference(kind)
    if reference is None:
        raise TypeError(f"{path}: {kind.__qualname__} values round-trip only when the class is importable by "
                        "name (defined at module level, not in __main__ or a function)")
    return reference


def _dataclass(value: Any, path: str, seen: frozenset[int]) -> dict[str, Any]:
    kind = type(value)
    reference = _importable(kind, path)
    fields = dataclasses.fields(value)
    if any(not f.init for f in fields):
        raise TypeError(f"{path}: dataclass {kind.__qualname__} has fields outside __init__; it cannot be rebuilt")
    return _tagged("dataclass", type=reference,
                   fields={f.name: _encode(getattr(value, f.name), f"{path}.{f.name}", seen) for f in fields})


def _pydantic(value: Any, path: str) -> dict[str, Any]:
    kind = type(value)
    reference = _importable(kind, path)
    dumped = value.model_dump(mode="json")
    if kind.model_validate(dumped) != value:
        raise TypeError(f"{path}: pydantic model {kind.__qualname__} does not validate its own dump back to an "
                        "equal value")
    return _tagged("pydantic", type=reference, value=_encode(dumped, f"{path}.value"))


def _refuse(value: Any, path: str) -> Any:
    kind = type(value)
    for base in (bool, int, float, str, list, dict, tuple, datetime, date):
        if isinstance(value, base):
            raise TypeError(f"{path}: {kind.__name__} is a subclass of {base.__name__} and would come back as a "
                            f"plain {base.__name__}; convert it first ({base.__name__}(...))")
    raise TypeError(f"{path}: {kind.__name__} value {value!r:.80} does not round-trip through JSON")


def _decoder(user_types: bool) -> Callable[[dict[str, Any]], Any]:
    def hook(obj: dict[str, Any]) -> Any:
        tag = obj.get(TAG)
        if tag is None:
            return obj
        if tag == "tuple":
            return tuple(obj["items"])
        if tag == "datetime":
            return datetime.fromisoformat(obj["value"])
        if tag == "date":
            return date.fromisoformat(obj["value"])
        if tag == "uuid":
            return uuid.UUID(obj["value"])
        if tag == "decimal":
            return Decimal(obj["value"])
        if tag in ("enum", "dataclass", "pydantic"):
            return _revive(tag, obj) if user_types else obj
        if tag == "child_failed":  # a child run that did not complete (ductline.childruns)
            from ductline.childruns import ChildRunFailed

            return ChildRunFailed(**{k: v for k, v in obj.items() if k != TAG})
        if tag == "children":  # the child runs a step started, as its awaiting job keeps them
            return obj
        raise TypeError(f"a value tagged {tag!r} was written by a newer version of ductline than this one "
                        "(which knows tuple, datetime, date, uuid, decimal, enum, dataclass, pydantic, child_failed, "
                        "children); "
                        "upgrade ductline where it is read")
    return hook


def _revive(tag: str, obj: dict[str, Any]) -> Any:
    kind = _resolve(obj.get("type"), f"{tag} value")
    if tag == "enum":
        if not issubclass(kind, enum.Enum):
            raise TypeError(f"{obj['type']} is not an Enum")
        return kind(obj["value"])
    if tag == "dataclass":
        if not dataclasses.is_dataclass(kind):
            raise TypeError(f"{obj['type']} is not a dataclass")
        return kind(**obj["fields"])
    model = _pydantic_base()
    if model is None or not issubclass(kind, model):
        raise TypeError(f"{obj['type']} is not a pydantic model (is pydantic installed here?)")
    return kind.model_validate(obj["value"])  # type: ignore[attr-defined]


_REVIVE_ALL = _decoder(True)
_REVIVE_STDLIB = _decoder(False)


# One encoder for every `dumps`: json.dumps builds a new one for each call that
# passes options, which cost as much as encoding a small value.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


# `structure_text`'s: compact like `_ENCODER`, but a structure read back is written
# as it was read (json.loads accepts NaN, so it is not refused here).
_STRUCTURE_ENCODER = json.JSONEncoder(separators=(",", ":"))


def dumps(value: Any, *, what: str = "value") -> str:
    """Encode a value as JSON text under the round-trip rule.

    Args:
        value: the value to encode.
        what: a name for the value used in error messages (e.g. ``"argument 0"``).

    Raises:
        ductline.PayloadNotSerializable: (a ``TypeError``) the value would not
            round-trip exactly; the message says where in it and why.
    """
    try:
        return _ENCODER.encode(_encode(value, what))
    except RecursionError:
        raise PayloadNotSerializable(f"{what}: nested too deeply to encode") from None
    except PayloadNotSerializable:
        raise
    except TypeError as exc:
        # One type for every refusal, raised here where the rule is applied, so that a
        # driver tells a value that never round-trips from a step's own TypeError.
        raise PayloadNotSerializable(str(exc)) from None


def loads(text: str | None, *, user_types: bool = True) -> Any:
    """Decode JSON text written by `dumps` (``None`` stays ``None``).

    Args:
        user_types: rebuild enums, dataclasses and pydantic models by importing
            their classes; ``False`` leaves them as their tagged JSON objects (for
            readers such as the CLI and the dashboard, which import no user code).

    Raises:
        TypeError: a tag unknown to this version, or a class that cannot be imported.
    """
    if text is None:
        return None
    return json.loads(text, object_hook=_REVIVE_ALL if user_types else _REVIVE_STDLIB)


# -- structure only: what a process that never runs user code reads --------------------
_USER_TAGS = frozenset({"enum", "dataclass", "pydantic"})


def structure(text: str | None) -> Any:
    """Decode JSON text written by `dumps` into its structure only: every tagged
    value stays its tagged JSON object, nothing is imported and no user type is
    constructed. A worker parent reads outputs so (it splits an expand's list and
    routes a divert without running user code: docs/howto/payloads.md)."""
    return None if text is None else json.loads(text)


def structure_text(value: Any) -> str:
    """The JSON text of a structure read by `structure` (tags kept as they were),
    written as `dumps` writes it."""
    return _STRUCTURE_ENCODER.encode(value)


def structure_type(value: Any) -> str:
    """The name of the type a structure stands for: a tagged value's (``tuple``,
    ``datetime``, a dataclass's or enum's qualified name), else the JSON type's
    Python name (``dict``, ``list``, ``str``, ...)."""
    if isinstance(value, dict) and isinstance(value.get(TAG), str):
        reference = value.get("type")
        if value[TAG] in _USER_TAGS and isinstance(reference, str):
            return reference.rpartition(":")[2]
        return str(value[TAG])
    return type(value).__name__


def _user_typed(value: Any) -> bool:
    if isinstance(value, dict):
        if value.get(TAG) in _USER_TAGS:
            return True
        return any(_user_typed(item) for item in value.values())
    if isinstance(value, list):
        return any(_user_typed(item) for item in value)
    return False


def plain_str(value: Any) -> str | None:
    """``str()`` of the value a structure stands for, when that needs no user code:
    plain JSON and the standard library's tagged types (a divert's key). ``None``
    when a user type (enum, dataclass, pydantic model) is inside: only the process
    that ran the step can render it."""
    if _user_typed(value):
        return None
    decoded = json.loads(structure_text(value), object_hook=_REVIVE_STDLIB)
    return str(decoded)


def safe_text(text: str) -> str:
    """Text made storable and printable: NUL as the four characters ``\\x00`` (a
    PostgreSQL text column cannot hold NUL) and lone surrogates as their
    ``\\udXXX`` escapes (they are not valid UTF-8). Valid text is returned unchanged."""
    if text.isascii():
        return text.replace("\x00", "\\x00") if "\x00" in text else text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00")


def clean_text(text: str) -> str:
    """Make free text (error messages, tracebacks) storable (see `safe_text`)."""
    return safe_text(text)


def render(value: object, what: str = "value") -> str:
    """``str(value)`` made storable, or a text that says why it could not be
    rendered (a ``__str__`` that raises, or returns something else)."""
    try:
        text = str(value)
        if type(text) is not str:
            raise TypeError(f"__str__ returned {type(text).__name__}")
    except Exception as exc:  # noqa: BLE001 - the step's object, any error
        return f"<{what} of type {type(value).__name__} could not be rendered: {type(exc).__name__}>"
    return safe_text(text)
