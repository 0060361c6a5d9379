"""A step's exception whose ``str()`` raises, returns something other than text,
or returns text a database cannot hold is rendered in the child: the recorded
error says so, and the parent never calls the step's code."""

from __future__ import annotations

import iso_app
import pytest

import ductline
from ductline.views import run_view

EXPECTED = {
    "raises": ("StrRaises", "<exception str() raised ValueError>"),
    "not_text": ("StrNotText", "<exception str() raised TypeError>"),
    "unencodable": ("StrUnencodable", "nul\\x00 and a lone \\ud800 surrogate"),
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_worker_records_what_could_not_be_rendered(store, inprocess_worker, kind):
    inprocess_worker(concurrency=1)
    handle = iso_app.unrenderable.trigger(kind, database=store)
    assert handle.wait(60) == "halted"
    [attempt] = run_view(store, handle.id)["steps"][0]["attempts"]
    name, message = EXPECTED[kind]
    assert attempt["error_type"].endswith(name)
    assert attempt["error"] == message
    assert attempt["traceback"] and "raise_unrenderable" in attempt["traceback"]


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_execute_records_what_could_not_be_rendered(kind):
    step = ductline.execute(iso_app.unrenderable, kind, concurrency=1).steps[0]
    name, message = EXPECTED[kind]
    assert step.error_type.endswith(name)
    assert step.error == message
