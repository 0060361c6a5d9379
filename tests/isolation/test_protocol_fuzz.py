"""The worker parent survives anything a child sends: random bytes, partial
messages, messages of the protocol's shape with hostile text (lone surrogates,
NUL, sizes past the cap). A real worker keeps serving and every attempt ends
recorded."""

from __future__ import annotations

import struct
from pathlib import Path

from helpers import start_worker, stop_worker, wait_for
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import fuzz_app
from ductline.views import run_view

FUZZ_APP = str(Path(__file__).parent.parent / "apps" / "fuzz_app.py")
# A small payload limit makes messages past the worker's cap cheap to send.
ENV = {"DUCTLINE_PAYLOAD_MAX_BYTES": "100000"}
SETTLED = ("completed", "halted", "failed")

hostile_text = st.text(alphabet=st.characters(codec=None, categories=None), max_size=40) | st.sampled_from(
    ["\x00", "\ud800", "a\udfffb", "\x00" * 100, "", "done", "\U0010ffff"])
hex_text = hostile_text.map(lambda t: t.encode("utf-8", "surrogatepass").hex())
kinds = st.sampled_from(["done", "error", "request", "ready", "fatal", "reply", "run", "stop", "", "\x00"])
messages = st.fixed_dictionaries({
    "mode": st.just("message"),
    "kind": kinds,
    "texts": st.lists(hex_text, max_size=6),
    "number": st.integers(min_value=-(2**70), max_value=2**70),
    "huge": st.sampled_from([0, 0, 0, 1000, 700_000]),
    # What a request asks: the parent's request names, and anything else.
    "request": st.sampled_from(["timeout", "context_get", "context_set", "boundary", "payload_chunk"]) | hostile_text,
})
raw = st.fixed_dictionaries({
    "mode": st.just("raw"),
    "hex": st.binary(min_size=1, max_size=200).map(bytes.hex),
    "framed": st.booleans(),
})


def _settled(store, handle):
    run = store.get_run(handle.id)
    return run is not None and run["status"] in SETTLED and run["status"]


def test_the_worker_survives_whatever_a_child_sends(store):
    proc = start_worker(store.url, concurrency=2, env=ENV, app=FUZZ_APP)
    try:
        @settings(max_examples=25, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(spec=messages | raw)
        @example(spec={"mode": "message", "kind": "request", "request": "timeout", "texts": [], "number": 0,
                       "huge": 0})
        @example(spec={"mode": "message", "kind": "request", "request": "timeout", "texts": ["00eda080"],
                       "number": 2, "huge": 0})
        @example(spec={"mode": "message", "kind": "request", "request": "payload_chunk", "texts": [],
                       "number": 2**70 + 1, "huge": 0})
        @example(spec={"mode": "raw", "hex": "ffffffff", "framed": False})
        def one(spec):
            handle = fuzz_app.fuzzed.trigger(spec, database=store)
            wait_for(lambda: proc.poll() is not None or _settled(store, handle), timeout=60)
            assert proc.poll() is None, "the worker died"
            attempts = run_view(store, handle.id)["steps"][0]["attempts"]
            assert attempts and all(a["result"] for a in attempts), attempts

        one()
        # Still serving: a plain run completes.
        handle = fuzz_app.healthy.trigger(1, database=store)
        wait_for(lambda: _settled(store, handle) == "completed", timeout=60)
    finally:
        assert stop_worker(proc) == 0


def test_a_partial_message_does_not_hold_the_worker(store):
    proc = start_worker(store.url, concurrency=2, app=FUZZ_APP)
    try:
        stalled = fuzz_app.stalled.trigger(600, database=store)
        wait_for(lambda: any(j["status"] == "running" for j in store.run_jobs(stalled.id)), timeout=60)
        # While one child holds half a message, the other slot serves.
        healthy = fuzz_app.healthy.trigger(1, database=store)
        wait_for(lambda: _settled(store, healthy) == "completed", timeout=60)
        wait_for(lambda: _settled(store, stalled), timeout=60)
        [attempt] = run_view(store, stalled.id)["steps"][0]["attempts"]
        # The frame stops arriving: a protocol error at the frame bound, long before
        # the step's timeout.
        assert (attempt["result"], attempt["error_type"]) == ("crashed", "ductline.ProtocolError")
        assert "left incomplete" in attempt["error"]
    finally:
        assert stop_worker(proc) == 0


def test_junk_that_reads_as_an_oversized_header_is_a_protocol_error(store):
    """A frame of junk whose first bytes read as a small size, then bytes that read as
    a size past the cap: the junk frame explains the size, so the attempt is recorded
    as the protocol error it is, never as a payload too large."""
    junk = struct.pack("!i", 5) + b"hello" + b"\xff" * 12
    proc = start_worker(store.url, concurrency=1, env=ENV, app=FUZZ_APP)
    try:
        handle = fuzz_app.fuzzed.trigger({"mode": "raw", "hex": junk.hex(), "framed": False}, database=store)
        wait_for(lambda: _settled(store, handle), timeout=60)
        first = run_view(store, handle.id)["steps"][0]["attempts"][0]
        assert (first["result"], first["error_type"]) == ("crashed", "ductline.ProtocolError")
    finally:
        assert stop_worker(proc) == 0


def test_a_fatal_message_in_the_middle_of_an_attempt_is_a_protocol_error(store):
    """FATAL is only a new child's answer instead of READY. Written by a running step,
    it gets the child killed and the attempt recorded as the protocol error it is; the
    next job on the slot runs on a new child and is charged nothing."""
    proc = start_worker(store.url, concurrency=1, app=FUZZ_APP)
    try:
        forged = fuzz_app.forged_fatal.trigger(30, database=store)
        wait_for(lambda: _settled(store, forged), timeout=60)
        [attempt] = run_view(store, forged.id)["steps"][0]["attempts"]
        assert (attempt["result"], attempt["error_type"]) == ("crashed", "ductline.ProtocolError")
        assert "FATAL" in attempt["error"]
        after = fuzz_app.healthy.trigger(1, database=store)
        wait_for(lambda: _settled(store, after), timeout=60)
        assert [a["result"] for a in run_view(store, after.id)["steps"][0]["attempts"]] == ["succeeded"]
    finally:
        assert stop_worker(proc) == 0


def test_a_job_sent_ahead_to_a_child_killed_for_junk_never_runs_twice_under_one_attempt(store, tmp_path):
    """The child of a step that wrote junk may start the job sent ahead to it before
    its parent kills it: that attempt is recorded (released, as begun) and the job runs
    again under the next number. Every execution is an attempt on record, none twice."""
    marks = tmp_path / "marks.txt"
    marks.touch()
    proc = start_worker(store.url, concurrency=1, app=FUZZ_APP, env={"FUZZ_MARKS": str(marks)})
    try:
        warm = fuzz_app.marked_steps.trigger_many([[i] for i in range(50)], database=store)  # short attempts: sent ahead
        handles = []
        for _ in range(12):
            handles.append(fuzz_app.junk_writer.trigger(0, database=store))
            handles += fuzz_app.marked_steps.trigger_many([[i] for i in range(4)], database=store)
        for handle in warm + handles:
            wait_for(lambda: _settled(store, handle), timeout=60)
    finally:
        assert stop_worker(proc) == 0
    executions = marks.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(executions) == len(set(executions)), "an attempt ran twice"
    recorded = {f"{h.id} {step['step']} {a['attempt']}" for h in warm + handles
                for step in run_view(store, h.id)["steps"] for a in step["attempts"]}
    assert set(executions) <= recorded
    released = [a for h in warm + handles for step in run_view(store, h.id)["steps"] for a in step["attempts"]
                if a["error_type"] == "Released"]
    assert all(a["error"] == "started in a child that was being killed for the attempt before it"
               for a in released)
