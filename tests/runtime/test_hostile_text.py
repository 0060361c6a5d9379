"""NUL and lone surrogates in everything a step hands its worker, on both backends
(PostgreSQL's text refuses NUL, and its jsonb the escaped NUL): values round-trip
exactly; free text (errors, log lines) is stored escaped; a context key that would
be stored as another is refused; nothing recorded before is lost."""

from __future__ import annotations

from pathlib import Path

import pytest
import text_app
from helpers import start_worker, stop_worker

from ductline.store import steplogs

APP = str(Path(__file__).parents[1] / "apps" / "text_app.py")
WEIRD = ["a\x00b", "\ud800", "x\udfffy", {"k\x00": "\udc80"}, ["\x00", "ünï\x00"]]


@pytest.fixture
def worker(db_url, store):
    proc = start_worker(db_url, concurrency=2, app=APP)
    yield proc
    stop_worker(proc)


def test_values_round_trip_and_free_text_is_stored_escaped(store, worker):
    echoed = [text_app.echoing.trigger(value, database=store) for value in WEIRD]
    logged = text_app.logging_text.trigger("nul \x00 and \ud800", database=store)
    kept = text_app.keeping.trigger({"v\x00": "\ud800"}, database=store)
    failed = text_app.failing.trigger("bad \x00 and \udc80", database=store)

    for value, handle in zip(WEIRD, echoed):
        assert handle.wait(60) == "completed"
        assert handle.output() == {"got": value, "and": ["\x00", "\ud800", "k\x00"]}

    assert logged.wait(60) == "completed" and logged.output() == "logged"
    records = [(r.level, r.logger, r.message) for r in steplogs.of_run(store.dialect, logged.id)]
    assert records == [("WARNING", "text\\x00app", "warned nul \\x00 and \\ud800"),
                       ("NO\\x00TE", "text\\x00app", "at a NUL level"),
                       ("TR\\ud800CE", "text\\x00app", "at a surrogate level"),
                       ("INFO", "stdout", "printed nul \\x00 and \\ud800"),
                       ("WARNING", "text\\x00app", "last")]

    assert kept.wait(60) == "completed"
    out = kept.output()
    assert out["value"] == {"v\x00": "\ud800"} and out["kept"] == "its own"
    assert [r.split(",")[0] for r in out["refused"]] == ["context keys cannot contain lone surrogates (stored as "
                                                         "their escape", "context keys cannot contain NUL"]

    assert failed.wait(60) == "halted"
    [attempt] = store.run_attempts(failed.id)
    assert (attempt["error_type"], attempt["error"]) == ("ValueError", "bad \\x00 and \\udc80")
    # What the earlier runs recorded is all still there.
    assert [h.output()["got"] for h in echoed] == WEIRD
    assert len(steplogs.of_run(store.dialect, logged.id)) == 5
