"""The dashboard's formatting filters: what a time, an age, a duration and a payload
look like to someone on call."""

from __future__ import annotations

import json

import pytest

from ductline.store import payloads
from ductline.web import present
from ductline.web.reader import COUNT_CAP

# 2030-01-02 09:04:05.678 UTC
MS = 1_893_575_045_678
PAYLOAD_ID = "0123456789abcdef0123456789abcdef"


def test_times_to_the_second_and_in_iso_with_milliseconds():
    assert present.clock(MS) == "2030-01-02 09:04:05 UTC"
    assert present.iso(MS) == "2030-01-02T09:04:05.678Z"
    assert present.clock(None) == "—" and present.iso(None) == ""


@pytest.mark.parametrize(("ms", "shown"), [
    (None, "—"),
    (-5, "0 ms"),
    (0, "0 ms"),
    (999, "999 ms"),
    (1000, "1.0 s"),
    (4249.9, "4.2 s"),
    (59_999, "60.0 s"),
    (60_000, "1 m 00 s"),
    (187_000, "3 m 07 s"),
    (3_599_999, "59 m 59 s"),
    (3_600_000, "1 h 00 m"),
    (7_500_000, "2 h 05 m"),
    (86_399_999, "23 h 59 m"),
    (86_400_000, "1 d 0 h"),
    (3 * 86_400_000 + 4 * 3_600_000 + 59 * 60_000, "3 d 4 h"),
])
def test_durations_in_the_largest_two_units(ms, shown):
    assert present.duration(ms) == shown


def test_ages_against_the_database_clock_past_and_future():
    assert present.ago(MS - 5_000, MS) == "5.0 s ago"
    assert present.ago(MS, MS) == "0 ms ago"
    assert present.ago(MS + 180_000, MS) == "in 3 m 00 s"
    assert present.ago(None, MS) == ""


def test_a_preview_is_cut_and_marked_and_an_out_of_line_payload_shows_its_size():
    assert present.preview(None) == ""
    assert present.preview(json.dumps("x" * 238)) == '"' + "x" * 238 + '"'
    assert present.preview(json.dumps("x" * 239)) == '"' + "x" * 239 + " …"
    assert present.preview('{"a": 1}', limit=3) == '{"a …'
    ref = payloads.reference(PAYLOAD_ID, 3 * 1024 * 1024 + 200 * 1024)
    assert present.preview(ref) == "<payload 3.2 MiB>"
    assert present.payload_id(ref) == PAYLOAD_ID
    assert present.payload_id('{"a": 1}') == "" and present.payload_id(None) == ""


def test_pretty_breaks_what_does_not_fit_a_line_and_says_where_it_cut():
    assert present.pretty(None) == ""
    assert present.pretty('{"b":[1,2],"é":"ü"}') == '{"b": [1, 2], "é": "ü"}'
    wide = {"numbers": list(range(40)), "name": "n" * 70}
    lines = present.pretty(json.dumps(wide)).splitlines()
    assert lines[:2] == ["{", '  "numbers": ['] and lines[-3:] == ["  ],", '  "name": "' + "n" * 70 + '"', "}"]
    assert len(lines) == 7 and all(len(line) <= 88 for line in lines)  # the numbers fill two lines
    assert " ".join(lines[2:4]).split() == [f"{n}," for n in range(39)] + ["39"]
    assert present.pretty("not json {").startswith("<unreadable: JSONDecodeError")
    assert present.pretty(json.dumps(list(range(100))), limit=10) == "[\n  0, 1, \n… (cut at 10 characters)"
    assert present.pretty(payloads.reference(PAYLOAD_ID, 640 * 1024)) == "<payload 640.0 KiB>"


def test_counts_above_the_readers_cap_read_as_at_least():
    assert present.count(COUNT_CAP) == str(COUNT_CAP)
    assert present.count(COUNT_CAP + 1) == f"{COUNT_CAP:,}+" == "1,000+"


def test_short_ids_and_dumps():
    assert present.short_id("0123456789abcdef") == "0123456789ab"
    assert present.dumps({"n": "é", "when": {"__ductline__": "x"}}) == '{"n": "é", "when": {"__ductline__": "x"}}'
