"""The value rule (docs/howto/payloads.md, "Values: the JSON rule"): a value round-trips with its
exact type or is refused with a TypeError that names where it is."""

from __future__ import annotations

import json
import math
import sys
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest

import ductline
from ductline import codec


def roundtrip(value: Any) -> Any:
    return codec.loads(codec.dumps(value))


def same(a: Any, b: Any) -> bool:
    """Equal *and* of the same types all the way down (so 1 != 1.0 != True)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and a == 0:
        return math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


PLAIN = [
    None, True, False, 0, 1, -1, 2**63, -(2**70), 0.0, -0.0, 0.1, 1e-300, 1.7976931348623157e308, 3.5,
    "", "text", "ünïcödé ✓ 🚀", "quote\"back\\slash\nnewline\ttab",
    [], {}, [1, "two", 3.0, None, True], {"a": 1, "b": [1, {"c": None}], "": "empty key"},
    {"z": 1, "a": 2, "m": 3},  # key order is kept
    [[[[[]]]]], {"nested": {"deeper": {"deepest": [1.5, False]}}},
]


@pytest.mark.parametrize("value", PLAIN, ids=[repr(v)[:30] for v in PLAIN])
def test_plain_json_values_round_trip_exactly(value: Any) -> None:
    back = roundtrip(value)
    assert same(back, value), (back, value)


def test_bool_and_int_stay_distinct() -> None:
    back = roundtrip([True, 1, 1.0, False, 0])
    assert [type(x) for x in back] == [bool, int, float, bool, int]


AWARE = [
    datetime(2024, 5, 17, 12, 30, 0, tzinfo=timezone.utc),
    datetime(2024, 5, 17, 12, 30, 0, 123456, tzinfo=timezone.utc),
    datetime(1999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=-8))),
]


@pytest.mark.parametrize("value", AWARE, ids=[v.isoformat() for v in AWARE])
def test_aware_datetime_round_trips_with_its_offset(value: datetime) -> None:
    back = roundtrip(value)
    assert type(back) is datetime
    assert back == value
    assert back.utcoffset() == value.utcoffset()
    assert back.isoformat() == value.isoformat()


def test_aware_datetime_is_tagged() -> None:
    value = datetime(2024, 5, 17, 12, 30, tzinfo=timezone.utc)
    text = codec.dumps(value)
    assert json.loads(text) == {"__ductline__": "datetime", "value": "2024-05-17T12:30:00+00:00"}


def test_zoneinfo_datetime_keeps_its_instant_and_offset() -> None:
    value = datetime(2024, 7, 1, 9, 0, tzinfo=ZoneInfo("Europe/Paris"))
    back = roundtrip(value)
    assert back == value
    assert back.utcoffset() == timedelta(hours=2)


def test_datetimes_nested_in_containers_round_trip() -> None:
    when = datetime(2024, 5, 17, 12, 30, tzinfo=timezone.utc)
    value = {"at": when, "list": [when, {"again": when}], "n": 1}
    back = roundtrip(value)
    assert back == value
    assert type(back["list"][1]["again"]) is datetime


def test_loads_none_is_none() -> None:
    assert codec.loads(None) is None
    assert codec.loads("null") is None


def test_dumps_is_compact() -> None:
    assert codec.dumps({"a": [1, 2]}) == '{"a":[1,2]}'


# -- refused values ------------------------------------------------------------------

REFUSED = [
    pytest.param({1, 2}, r"^value: set value \{1, 2\} does not round-trip", id="set"),
    pytest.param(frozenset({1}), r"^value: frozenset value", id="frozenset"),
    pytest.param(b"bytes", r"^value: bytes value b'bytes' does not round-trip", id="bytes"),
    pytest.param(bytearray(b"x"), r"^value: bytearray value", id="bytearray"),
    pytest.param(float("nan"), r"^value: nan is not representable in JSON", id="nan"),
    pytest.param(float("inf"), r"^value: inf is not representable in JSON", id="inf"),
    pytest.param(float("-inf"), r"^value: -inf is not representable in JSON", id="-inf"),
    pytest.param(datetime(2024, 1, 1, 12, 0), r"^value: naive datetime datetime\.datetime\(2024, 1, 1, 12, 0\); "
                                              r"give it a timezone", id="naive-datetime"),
    pytest.param(time(12, 0), r"^value: time value", id="time"),
    pytest.param(timedelta(seconds=1), r"^value: timedelta value", id="timedelta"),
    pytest.param({1: "a"}, r"^value: dict key 1 is not a str", id="int-key"),
    pytest.param({None: "a"}, r"^value: dict key None is not a str", id="none-key"),
    pytest.param({("a",): 1}, r"^value: dict key \('a',\) is not a str", id="tuple-key"),
    pytest.param({"__ductline__": "datetime", "value": "2024-01-01T00:00:00+00:00"},
                 r"^value: the key '__ductline__' is reserved by ductline", id="reserved-key"),
    pytest.param(object(), r"^value: object value", id="object"),
    pytest.param(1 + 2j, r"^value: complex value", id="complex"),
]


@pytest.mark.parametrize("value,pattern", REFUSED)
def test_unrepresentable_value_is_type_error(value: Any, pattern: str) -> None:
    # One public TypeError for every refusal: drivers and users tell it from a step's own TypeError.
    with pytest.raises(ductline.PayloadNotSerializable, match=pattern) as caught:
        codec.dumps(value)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ductline.DuctlineError)


def echo(raw: Any) -> Any:
    return raw


def test_trigger_arguments_that_do_not_round_trip_raise_payload_not_serializable() -> None:
    pipeline = ductline.Pipeline("refused_arguments").start(echo)
    with pytest.raises(ductline.PayloadNotSerializable, match=r"bytes value b'raw' does not round-trip"):
        ductline.execute(pipeline, b"raw")


@pytest.mark.parametrize("value,path", [
    ([1, {2, 3}], r"arg\[1\]"),
    ({"a": {"b": {1, 2}}}, r"arg\['a'\]\['b'\]"),
    ({"xs": [0, 1, b"raw"]}, r"arg\['xs'\]\[2\]"),
    ([{"ok": 1}, {"when": datetime(2024, 1, 1)}], r"arg\[1\]\['when'\]"),
    ([[float("nan")]], r"arg\[0\]\[0\]"),
    ([{"__ductline__": 1}], r"arg\[0\]: the key '__ductline__' is reserved"),
    ({"in": {2: "x"}}, r"arg\['in'\]: dict key 2 is not a str"),
], ids=["list", "nested-dict", "dict-list", "naive-in-dict", "nan-nested", "reserved-nested", "key-nested"])
def test_type_error_names_the_path(value: Any, path: str) -> None:
    with pytest.raises(TypeError, match=rf"^{path}"):
        codec.dumps(value, what="arg")


def test_similar_but_unreserved_key_is_fine() -> None:
    value = {"__ductline": 1, "__ductline__x": 2, "ductline": 3}
    assert roundtrip(value) == value


def test_long_repr_in_message_is_truncated() -> None:
    with pytest.raises(TypeError) as info:
        codec.dumps(b"x" * 10_000)
    assert len(str(info.value)) < 200


# -- strings -------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["\x00", "a\x00b", "\x00" * 5 + "tail", "nul \x00 and ünïcödé \x00"])
def test_strings_with_nul_round_trip(text: str) -> None:
    assert roundtrip(text) == text
    assert roundtrip({"k\x00ey": [text]}) == {"k\x00ey": [text]}


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\udc80", "\ud83d"])
def test_lone_surrogates_round_trip(text: str) -> None:
    assert roundtrip(text) == text
    assert roundtrip([text]) == [text]


def test_dumps_output_is_ascii_so_it_can_be_stored_as_text() -> None:
    text = codec.dumps(["\ud800", "ünï", "\x00"])
    text.encode("utf-8")  # a lone surrogate would fail here if it was not escaped
    assert "\x00" not in text


def test_safe_text_escapes_surrogates_and_nul_and_keeps_valid_text() -> None:
    assert codec.safe_text("a\udc80b") == "a\\udc80b"
    assert codec.safe_text("ünï\x00") == "ünï\\x00"
    assert codec.safe_text("plain") == "plain"
    codec.safe_text("\ud800\x00" * 3).encode("utf-8")


def test_render_survives_a_str_that_raises() -> None:
    class Hostile(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert codec.render(Hostile(), "error") == "<error of type Hostile could not be rendered: RuntimeError>"
    assert codec.render("x\udc80") == "x\\udc80"


def test_clean_text_replaces_nul() -> None:
    assert codec.clean_text("a\x00b\x00") == "a\\x00b\\x00"
    assert "\x00" not in codec.clean_text("\x00" * 3)
    assert codec.clean_text("no nul, ünï") == "no nul, ünï"
    assert codec.clean_text("") == ""


# -- known gaps in the rule ------------------------------------------------------------

def test_an_int_round_trips_up_to_the_interpreter_s_digit_limit_and_is_refused_past_it() -> None:
    limit = sys.get_int_max_str_digits()
    largest = 10**limit - 1  # `limit` digits
    assert codec.loads(codec.dumps({"n": largest}, what="arg")) == {"n": largest}
    assert codec.loads(codec.dumps(-largest, what="arg")) == -largest
    with pytest.raises(TypeError, match=rf"arg\['n'\]: int with more than {limit} digits"):
        codec.dumps({"n": 10**limit}, what="arg")


def test_huge_int_round_trips_or_is_type_error() -> None:
    value = {"n": 10**5000}
    try:
        text = codec.dumps(value, what="arg")
    except TypeError as exc:
        assert "arg['n']" in str(exc)
        return
    assert codec.loads(text) == value


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_circular_value_is_type_error(kind: str) -> None:
    value: Any
    if kind == "list":
        value = [1]
        value.append(value)
    else:
        value = {"a": 1}
        value["self"] = value
    with pytest.raises(TypeError):
        codec.dumps(value)


def test_structure_text_writes_a_structure_as_it_was_read() -> None:
    for text in ('{"a":[1,2.5,"é"],"b":null}', '{"__ductline__":"tuple","items":[1,2]}', "NaN", '"x\\ny"'):
        assert codec.structure_text(codec.structure(text)) == json.dumps(json.loads(text), separators=(",", ":"))
