"""Limit keys and step limits (`ductline.model.limits`), and scopes
(`ductline.model.scopes`)."""

from __future__ import annotations

from typing import Any

import pytest

import rules_definitions as D
import steps_for_tests as S
from ductline.dsl.options import build_options
from ductline.model import scopes
from ductline.model.limits import MAX_KEY_VALUE, StepLimit, limit_key, step_limits

LONG = "x" * 300


@pytest.mark.parametrize(("options", "input_json", "expected"), [
    pytest.param({}, '[{"customer":"acme"}]', None, id="unlimited"),
    pytest.param({"concurrency": 2}, '[{"customer":"acme"}]', "p:s", id="concurrency"),
    pytest.param({"rate": 0.5}, "[]", "p:s", id="rate"),
    pytest.param({"concurrency": 1, "rate": 3}, "[1]", "p:s", id="both"),
    pytest.param({"concurrency": 1, "concurrency_key": "customer"}, '[{"customer":"acme"}]', 'p:s:"acme"',
                 id="keyed-str"),
    pytest.param({"rate": 2, "concurrency_key": "customer"}, '[{"customer":"acme"}]', 'p:s:"acme"',
                 id="keyed-by-rate"),
    pytest.param({"concurrency": 1, "concurrency_key": "id"}, '[{"id":42}]', "p:s:42", id="keyed-int"),
    pytest.param({"concurrency": 1, "concurrency_key": "id"}, '[{"id":"42"}]', 'p:s:"42"',
                 id="keyed-str-not-int"),
    pytest.param({"concurrency": 1, "concurrency_key": "id"}, '[{"id":true}]', "p:s:true", id="keyed-bool"),
    pytest.param({"concurrency": 1, "concurrency_key": "id"}, '[{"id":null}]', "p:s:null", id="keyed-null"),
    pytest.param({"concurrency": 1, "concurrency_key": "id"}, '[{"id":{"b":1,"a":[2, 3]}}]',
                 'p:s:{"a":[2,3],"b":1}', id="keyed-object-canonical"),
    pytest.param({"concurrency": 1, "concurrency_key": "id"}, '[{"other":1}]', "p:s:null", id="field-missing"),
    pytest.param({"concurrency": 1, "concurrency_key": "id"}, '[["id"]]', "p:s:null", id="first-arg-not-dict"),
    pytest.param({"concurrency": 1, "concurrency_key": "id"}, '[7, {"id":1}]', "p:s:null",
                 id="only-the-first-argument"),
    pytest.param({"concurrency": 1, "concurrency_key": "id"}, "[]", "p:s:null", id="no-arguments"),
    pytest.param({"concurrency": 1, "concurrency_key": "id"}, '{"id":1}', "p:s:null", id="input-not-a-list"),
    pytest.param({"concurrency": 1, "concurrency_key": "id"}, f'[{{"id":"{LONG}"}}]',
                 'p:s:"' + "x" * (MAX_KEY_VALUE - 1), id="long-value-cut"),
])
def test_limit_key(options: dict[str, Any], input_json: str, expected: str | None) -> None:
    assert limit_key("p", "s", build_options(**options), input_json) == expected


def test_limit_key_value_is_cut_to_max_key_value_characters() -> None:
    key = limit_key("p", "s", build_options(concurrency=1, concurrency_key="id"), f'[{{"id":"{LONG}"}}]')
    assert key is not None
    assert MAX_KEY_VALUE == 200
    assert len(key) == len("p:s:") + MAX_KEY_VALUE


def test_step_limits() -> None:
    limited = (D.new().start(S.a).chain(to=S.b, concurrency=2).chain(to=S.c, rate=5)
               .chain(to=S.d, concurrency=1, rate=0.5, concurrency_key="k").definition())
    other = D.new().start(S.a, concurrency=3).definition()
    unlimited = D.linear()
    found = step_limits({d.name: d for d in (limited, other, unlimited)})
    assert found == {
        (limited.name, "b"): StepLimit(2, None),
        (limited.name, "c"): StepLimit(None, 5.0),
        (limited.name, "d"): StepLimit(1, 0.5),
        (other.name, "a"): StepLimit(3, None),
    }
    assert isinstance(found[(limited.name, "c")].rate, float)


def test_step_limits_of_nothing_limited() -> None:
    assert step_limits({}) == {}
    definition = D.linear()
    assert step_limits({definition.name: definition}) == {}


# -- scopes ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("scope", "index", "expected"), [
    pytest.param("", 0, "0", id="top-0"),
    pytest.param("", 12, "12", id="top-12"),
    pytest.param("3", 0, "3/0", id="nested"),
    pytest.param("1/2", 10, "1/2/10", id="deep"),
])
def test_child(scope: str, index: int, expected: str) -> None:
    assert scopes.child(scope, index) == expected
    assert scopes.parent(expected) == scope
    assert scopes.element_index(expected) == index


@pytest.mark.parametrize(("scope", "parent", "index"), [
    pytest.param("", "", None, id="top-level"),
    pytest.param("7", "", 7, id="element"),
    pytest.param("10", "", 10, id="two-digits"),
    pytest.param("1/3", "1", 3, id="nested"),
    pytest.param("0/12/4", "0/12", 4, id="deep"),
])
def test_parent_and_element_index(scope: str, parent: str, index: int | None) -> None:
    assert scopes.parent(scope) == parent
    assert scopes.element_index(scope) == index


@pytest.mark.parametrize(("scope", "key"), [
    pytest.param("", (), id="top-level"),
    pytest.param("2", (2,), id="element"),
    pytest.param("10", (10,), id="two-digits"),
    pytest.param("1/3", (1, 3), id="nested"),
])
def test_sort_key(scope: str, key: tuple[int, ...]) -> None:
    assert scopes.sort_key(scope) == key


@pytest.mark.parametrize(("before", "after"), [
    pytest.param("2", "10", id="2<10"),
    pytest.param("9", "10", id="9<10"),
    pytest.param("", "0", id="top<element"),
    pytest.param("1", "1/3", id="parent<child"),
    pytest.param("1/3", "2", id="nested<next-element"),
    pytest.param("1/2", "1/10", id="nested-2<10"),
    pytest.param("1/10", "10/1", id="outer-index-first"),
])
def test_sort_key_orders_elements_numerically(before: str, after: str) -> None:
    assert scopes.sort_key(before) < scopes.sort_key(after)


def test_sorting_scopes() -> None:
    mixed = ["10", "2", "1/3", "1", "", "1/10", "1/2", "0"]
    assert sorted(mixed, key=scopes.sort_key) == ["", "0", "1", "1/2", "1/3", "1/10", "2", "10"]
