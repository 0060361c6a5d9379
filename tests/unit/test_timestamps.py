"""One form of ductline's own times in CLI and API output (`ductline.timestamps.iso`),
and a run's stored moves (``at_ms``) given out with ``at`` in that form."""

from __future__ import annotations

from ductline import views
from ductline.observability import health
from ductline.timestamps import iso
from ductline.web import present


def test_iso_is_utc_to_the_millisecond_with_a_z():
    assert iso(1_900_000_000_123) == "2030-03-17T17:46:40.123Z"
    assert iso(0) == "1970-01-01T00:00:00.000Z"
    assert iso(None) is None
    # every copy the CLI, the health report and the dashboard use is this one
    assert views.iso(5) == health.iso(5) == present.iso(5) == iso(5)
    assert (health.iso(None), present.iso(None)) == ("", "")


def test_moves_are_given_out_with_at_and_stored_ones_stay_readable():
    stored = {"error": "x", "moves": [{"from": "a", "to": "b", "steps": {}, "at_ms": 1_900_000_000_123},
                                      {"from": "b", "to": "c", "steps": {"s": "t"}}]}
    assert views.shown_metadata(stored) == {"error": "x", "moves": [
        {"from": "a", "to": "b", "steps": {}, "at": "2030-03-17T17:46:40.123Z"},
        {"from": "b", "to": "c", "steps": {"s": "t"}}]}
    assert stored["moves"][0]["at_ms"] == 1_900_000_000_123  # not changed in place
    assert views.shown_metadata({"cancelled": True}) == {"cancelled": True}
    odd = {"moves": [{"at_ms": 10 ** 30}, {"at_ms": True}, "x"]}   # written by hand: given as stored
    assert views.shown_metadata(odd) == odd
