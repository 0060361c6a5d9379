"""Every attempt ends in bounded time whatever the step writes into its channel:
bytes ahead of a result frame make it unframeable, and the attempt is recorded
(``ductline.ProtocolError``, or ``ductline.PayloadTooLarge`` when the bytes read as
a size past the cap) within the frame bound of the step returning, with no step
timeout set; its child is never reused. The channel sits on a descriptor a step
does not stumble on. Both drivers: a worker (SQLite, PostgreSQL) and ``execute``."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from helpers import start_worker, stop_worker, wait_for
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import ductline
import fuzz_app
from ductline.model.endings import FRAME_BOUND_SECONDS
from ductline.views import run_view

FUZZ_APP = str(Path(__file__).parent.parent / "apps" / "fuzz_app.py")
# Room for a loaded machine between the step's return and the record (the step
# itself takes milliseconds). Without the bound such an attempt never ends.
SLACK_SECONDS = 5.0
ENDED = {("crashed", "ductline.ProtocolError"), ("errored", "ductline.PayloadTooLarge")}
prefixes = st.binary(min_size=1, max_size=64)
SETTINGS = settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
# A header announcing more than the result frame holds: without the bound, the
# attempt waited for the rest for ever.
SMALL_HEADER = bytes.fromhex("00000400")
# A header announcing more than any result may hold: a payload too large.
HUGE_HEADER = bytes.fromhex("7fffffff")
# The prefix decides only what the worker parent reads from the channel, which no store
# sees; the store records one of the two endings (`ENDED`). SQLite runs the examples
# that give each of them, PostgreSQL and ``execute`` every generated prefix too.
EXPLICIT_ONLY = settings(SETTINGS, phases=[Phase.explicit])


def _pids(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split()


def _attempts_ok(attempts):
    """A protocol error is retried once (a crash); a payload too large never is."""
    first = attempts[0]["error_type"]
    return len(attempts) == (1 if first == "ductline.PayloadTooLarge" else 2)


def _settled(store, handle):
    run = store.get_run(handle.id)
    return run is not None and run["status"] in ("completed", "halted", "failed") and run["status"]


def test_a_worker_ends_an_attempt_whose_result_cannot_be_framed(store, tmp_path):
    proc = start_worker(store.url, concurrency=1, app=FUZZ_APP)
    endings = set()
    try:
        @(EXPLICIT_ONLY if store.url.startswith("sqlite") else SETTINGS)
        @given(prefix=prefixes)
        @example(prefix=SMALL_HEADER)
        @example(prefix=HUGE_HEADER)
        def one(prefix):
            pids = tmp_path / f"pids-{prefix.hex()}"
            pids.write_text("", encoding="utf-8")
            handle = fuzz_app.garbled.trigger({"prefix": prefix.hex(), "pids": str(pids)}, database=store)
            wait_for(lambda: proc.poll() is not None or _settled(store, handle), timeout=60)
            assert proc.poll() is None, "the worker died"
            attempts = run_view(store, handle.id)["steps"][0]["attempts"]
            assert _attempts_ok(attempts), attempts
            for attempt in attempts:
                assert (attempt["result"], attempt["error_type"]) in ENDED, attempt
                assert attempt["duration_ms"] / 1000 < FRAME_BOUND_SECONDS + SLACK_SECONDS, attempt
                endings.add((attempt["result"], attempt["error_type"]))
            # Each attempt on a child of its own, and the next job (one slot) too.
            after = fuzz_app.pid_of_child.trigger(0, database=store)
            wait_for(lambda: _settled(store, after), timeout=60)
            assert len(set(_pids(pids) + [str(after.output())])) == len(attempts) + 1, \
                "a child that garbled its channel ran another attempt"

        one()
    finally:
        assert stop_worker(proc) == 0
    assert endings == ENDED, "the examples no longer give both endings"


@SETTINGS
@given(prefix=prefixes)
@example(prefix=SMALL_HEADER)
@example(prefix=HUGE_HEADER)
def test_execute_ends_an_attempt_whose_result_cannot_be_framed(prefix, tmp_path_factory):
    pids = tmp_path_factory.mktemp("garbled") / "pids"
    pids.write_text("", encoding="utf-8")
    result = ductline.execute(fuzz_app.garbled, {"prefix": prefix.hex(), "pids": str(pids)}, concurrency=1)
    [step] = result.steps
    assert _attempts_ok([{"result": a.result, "error_type": a.error_type} for a in step.history]), step
    for attempt in step.history:
        assert (attempt.result, attempt.error_type) in ENDED, attempt
        elapsed = attempt.finished_at - attempt.started_at
        assert elapsed < timedelta(seconds=FRAME_BOUND_SECONDS + SLACK_SECONDS), attempt
    assert len(set(_pids(pids))) == step.attempts, "a child that garbled its channel ran another attempt"


def test_a_step_writing_to_low_descriptors_and_stdout_does_not_hit_the_channel(store):
    proc = start_worker(store.url, concurrency=1, app=FUZZ_APP)
    try:
        handle = fuzz_app.scribbler.trigger(1, database=store)
        wait_for(lambda: _settled(store, handle), timeout=60)
        assert (store.get_run(handle.id)["status"], handle.output()) == ("completed", 2)
    finally:
        assert stop_worker(proc) == 0
    result = ductline.execute(fuzz_app.scribbler, 1, concurrency=1)
    assert (result.overall_status, result.steps[0].output) == ("success", 2)


def test_the_channel_sits_high_and_is_closed_on_exec():
    import fcntl
    import socket

    from ductline.execution.child import out_of_the_way

    left, right = socket.socketpair()
    try:
        moved = out_of_the_way(right.detach())
        assert moved >= 64
        assert fcntl.fcntl(moved, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        os.write(moved, b"x")
        assert left.recv(1) == b"x"
        os.close(moved)
    finally:
        left.close()
