"""Stored values shown as what they are (type and text), never in their stored form,
and without importing or building a user's class."""

from __future__ import annotations

import json
import sys
from datetime import date, datetime, timezone
from decimal import Decimal
from uuid import UUID

import pytest
import rt_app
import value_types
import web_support

from ductline import codec
from ductline.store import Store
from ductline.web import create_app, values

WHEN = datetime(2030, 1, 2, 9, 0, tzinfo=timezone.utc)
VALUE = {"invoice": value_types.Invoice(7, ("a", 2)), "when": WHEN, "day": date(2030, 1, 2),
         "id": UUID(int=5), "price": Decimal("9.90"), "colour": value_types.Colour.RED, "pair": (1,)}
SHOWN = ('{"invoice": Invoice(number=7, lines=("a", 2)), "when": datetime(2030-01-02T09:00:00+00:00), '
         '"day": date(2030-01-02), "id": UUID(00000000-0000-0000-0000-000000000005), "price": Decimal(9.90), '
         '"colour": Colour("red"), "pair": (1,)}')


@pytest.fixture
def refuse_rebuilds():
    value_types.REFUSE = True
    yield
    value_types.REFUSE = False


def test_every_tag_reads_as_its_type_and_text(refuse_rebuilds):
    assert values.text(values.decode(codec.dumps(VALUE))) == SHOWN
    assert "__ductline__" not in values.pretty(values.decode(codec.dumps([VALUE, VALUE])))


def test_the_api_form_gives_type_text_and_structure(refuse_rebuilds):
    shown = values.api_value(values.decode(codec.dumps(VALUE)))
    assert shown["invoice"] == {"type": "value_types:Invoice", "kind": "dataclass",
                                "text": 'Invoice(number=7, lines=("a", 2))',
                                "fields": {"number": 7, "lines": {"type": "tuple", "text": '("a", 2)',
                                                                  "items": ["a", 2]}}}
    assert shown["when"] == {"type": "datetime", "text": "datetime(2030-01-02T09:00:00+00:00)"}
    assert shown["colour"] == {"type": "value_types:Colour", "kind": "enum", "text": 'Colour("red")', "value": "red"}
    assert "__ductline__" not in json.dumps(shown)


def test_a_class_is_never_imported():
    stored = '{"__ductline__":"dataclass","type":"billing_never_imported.models:Invoice","fields":{"n":1}}'
    assert values.text(values.decode(stored)) == "Invoice(n=1)"
    assert "billing_never_imported" not in sys.modules and "billing_never_imported.models" not in sys.modules


def test_what_cannot_be_read_is_said_never_raised():
    assert values.text(values.decode('{"__ductline__":"rational","p":1}')) == \
        '<rational value this version cannot read> {"p": 1}'
    assert values.text(values.decode('{"__ductline__":"datetime","value":5}')) == \
        '<datetime value this version cannot read> {"value": 5}'
    assert values.text(values.decode("not json")).startswith("<unreadable: JSONDecodeError")
    assert values.text(values.decode("[" * 100_000 + "]" * 100_000)).startswith("<unreadable: RecursionError")
    assert values.api_value(values.decode("NaN")) == "nan"


def test_text_is_cut_at_its_budget_and_safe_to_show():
    assert values.text(values.decode(json.dumps(["x" * 50])), 10) == '["xxxxxxxx …'
    assert values.text(values.decode(json.dumps("\ud800\x1b[2J\u202e"))) == '"\\ud800\\u001b[2J\\u202e"'
    assert values.text(values.decode(json.dumps(list(range(10 ** 5)))), 100).endswith(" …")


def test_the_run_page_and_the_api_show_values_not_their_stored_form(backend, store: Store, refuse_rebuilds):
    from starlette.testclient import TestClient

    handle = rt_app.chain.trigger(VALUE, database=store)
    (job,) = web_support.claim(store, rt_app.chain)
    web_support.succeed(store, rt_app.chain, job, [value_types.Colour.RED, WHEN])
    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        page = client.get(f"/runs/{handle.id}").text
        assert "__ductline__" not in page
        assert "Invoice(number=7, lines=(&#34;a&#34;, 2))" in page and "datetime(2030-01-02T09:00:00+00:00)" in page
        assert "[Colour(&#34;red&#34;), datetime(2030-01-02T09:00:00+00:00)]" in page  # the step's output
        run = client.get(f"/api/runs/{handle.id}").json()
    assert "__ductline__" not in json.dumps(run)
    (args,) = run["args"]
    assert args["invoice"]["text"] == 'Invoice(number=7, lines=("a", 2))'
    assert run["steps"][0]["output"] == [
        {"type": "value_types:Colour", "kind": "enum", "text": 'Colour("red")', "value": "red"},
        {"type": "datetime", "text": "datetime(2030-01-02T09:00:00+00:00)"}]
