"""Richer values round-trip with their exact type through a documented tag; subclasses
of plain types are refused; a tag this version does not know is a clear error."""

from __future__ import annotations

import enum
import json
import uuid
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import pytest

from ductline import codec


class Colour(enum.Enum):
    RED = "red"
    BLUE = 2


class Level(enum.IntEnum):
    LOW = 1


@dataclass(frozen=True)
class Point:
    x: int
    y: float
    tags: tuple[str, ...] = ()


@dataclass
class Order:
    id: uuid.UUID
    placed: date
    total: Decimal
    at: Point
    colours: list[Colour] = field(default_factory=list)


@dataclass
class Derived:
    a: int
    b: int = field(init=False, default=0)


class Subint(int):
    pass


class Substr(str):
    pass


class Subfloat(float):
    pass


def roundtrip(value: Any) -> Any:
    return codec.loads(codec.dumps(value))


VALUES = [
    (1, 2), (), ((1, "a"), [2]),
    date(2024, 2, 29), uuid.UUID("12345678-1234-5678-1234-567812345678"),
    Decimal("1.10"), Decimal("-0.000001"), Decimal("NaN"),
    Colour.RED, Colour.BLUE, Level.LOW,
    Point(1, 2.5, ("a", "b")),
    Order(uuid.uuid4(), date(2024, 1, 2), Decimal("9.99"), Point(0, 0.0), [Colour.BLUE]),
    {"nested": [Point(3, 4.0), (Colour.RED,)]},
]


@pytest.mark.parametrize("value", VALUES, ids=[type(v).__name__ + str(i) for i, v in enumerate(VALUES)])
def test_rich_values_round_trip_with_their_exact_type(value: Any) -> None:
    back = roundtrip(value)
    assert type(back) is type(value)
    if isinstance(value, Decimal) and value.is_nan():
        assert back.is_nan()
    else:
        assert back == value
    assert codec.dumps(back) == codec.dumps(value)  # and encode the same again


def test_the_tags_are_documented_json() -> None:
    assert json.loads(codec.dumps((1, 2))) == {"__ductline__": "tuple", "items": [1, 2]}
    assert json.loads(codec.dumps(Colour.RED)) == {"__ductline__": "enum", "type": f"{__name__}:Colour",
                                                   "value": "red"}
    assert json.loads(codec.dumps(Point(1, 2.0)))["fields"] == {"x": 1, "y": 2.0,
                                                                "tags": {"__ductline__": "tuple", "items": []}}


def test_readers_without_user_code_keep_user_types_as_tagged_json() -> None:
    text = codec.dumps({"p": Point(1, 2.0), "d": date(2024, 1, 1)})
    raw = codec.loads(text, user_types=False)
    assert raw["p"]["__ductline__"] == "dataclass" and raw["d"] == date(2024, 1, 1)


@pytest.mark.parametrize("value,pattern", [
    (Subint(3), r"Subint is a subclass of int and would come back as a plain int"),
    (Substr("x"), r"Substr is a subclass of str"),
    (Subfloat(1.5), r"Subfloat is a subclass of float"),
    (OrderedDict(a=1), r"OrderedDict is a subclass of dict"),
    (defaultdict(list), r"defaultdict is a subclass of dict"),
    (Derived(1), r"fields outside __init__"),
    ({"k": {Substr("key"): 1}}, r"value\['k'\]: dict key 'key' is not a str"),
    ({1, 2}, r"set value"),
], ids=["int", "str", "float", "ordereddict", "defaultdict", "init-false", "str-key", "set"])
def test_values_that_would_change_type_are_refused(value: Any, pattern: str) -> None:
    with pytest.raises(TypeError, match=pattern):
        codec.dumps(value)


def test_classes_that_cannot_be_imported_by_name_are_refused() -> None:
    @dataclass
    class Local:
        a: int

    class LocalEnum(enum.Enum):
        A = 1

    with pytest.raises(TypeError, match="importable by name"):
        codec.dumps(Local(1))
    with pytest.raises(TypeError, match="importable by name"):
        codec.dumps([LocalEnum.A])


def test_a_tag_from_a_newer_version_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="tagged 'frobnicated' was written by a newer version of ductline"):
        codec.loads('{"__ductline__": "frobnicated", "value": 1}')


def test_a_type_reference_that_does_not_import_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="cannot import nowhere.at_all:Thing"):
        codec.loads('{"__ductline__": "dataclass", "type": "nowhere.at_all:Thing", "fields": {}}')
    with pytest.raises(TypeError, match="is not a dataclass"):
        codec.loads('{"__ductline__": "dataclass", "type": "json:JSONDecoder", "fields": {}}')


def test_aware_datetime_subclass_free_and_naive_refused() -> None:
    assert roundtrip(datetime(2024, 1, 1, tzinfo=timezone.utc)) == datetime(2024, 1, 1, tzinfo=timezone.utc)
    with pytest.raises(TypeError, match="naive"):
        codec.dumps(datetime(2024, 1, 1))


class Customer(__import__("pydantic").BaseModel):
    name: str
    since: date
    colour: Colour = Colour.BLUE


def test_pydantic_models_round_trip_through_their_own_validation() -> None:
    value = Customer(name="Ada", since=date(2020, 5, 1))
    back = roundtrip({"c": value})
    assert type(back["c"]) is Customer and back["c"] == value
    assert json.loads(codec.dumps(value))["__ductline__"] == "pydantic"
