"""How an attempt ended (`ductline.model.endings.ending`): one account for both
drivers, table-driven."""

from __future__ import annotations

import signal

import pytest

from ductline.model.endings import (SHUTDOWN_ERROR, Ending, Facts, KillReason, Report, Reported, ending,
                                    stalled_frame)
from ductline.model.resources import ResourceLimits
from ductline.model.states import AttemptResult

OK, ERR, CRASH, TIMED_OUT, CANCELLED = (AttemptResult.SUCCEEDED, AttemptResult.ERRORED, AttemptResult.CRASHED,
                                        AttemptResult.TIMED_OUT, AttemptResult.CANCELLED)
MEMORY = ResourceLimits(memory_bytes=1024)
CPU = ResourceLimits(cpu_seconds=2)


def facts(**fields):
    return Facts("load", 2, **fields)


@pytest.mark.parametrize("given, expected", [
    # a result the driver took
    (facts(report=Report(Reported.DONE, output="[1]", route_key="1")), Ending(OK, output="[1]", route_key="1")),
    (facts(report=Report(Reported.DONE, output='"x"', route_key="")), Ending(OK, output='"x"')),
    (facts(report=Report(Reported.DONE, output='"abc"'), max_output_bytes=4),
     Ending(ERR, error_type="ductline.PayloadTooLarge",
            error="output of step 'load': 5 bytes of JSON exceed the limit of 4 bytes (payload_max_bytes)")),
    (facts(report=Report(Reported.ERROR, error_type="ValueError", error="bad", traceback="tb")),
     Ending(ERR, error_type="ValueError", error="bad", traceback="tb")),
    (facts(report=Report(Reported.ERROR, error_type="MemoryError", error=""), limits=MEMORY),
     Ending(ERR, error_type="MemoryLimitExceeded", error="attempt exceeded memory_limit=1024 bytes")),
    (facts(report=Report(Reported.FATAL, error_type="ImportError", error="no app", traceback="tb")),
     Ending(ERR, error_type="ImportError", error="no app", traceback="tb")),
    # a report wins over a kill that came after it
    (facts(report=Report(Reported.DONE, output="1"), kill=KillReason.TIMEOUT), Ending(OK, output="1")),
    # killed by its driver
    (facts(kill=KillReason.TIMEOUT, timeout_seconds=3),
     Ending(TIMED_OUT, error_type="TimeoutError",
            error="attempt 2 of step 'load' exceeded the step timeout of 3 s and was killed")),
    (facts(kill=KillReason.TIMEOUT, timeout_seconds=3, run_deadline=True), Ending(TIMED_OUT, run_deadline=True)),
    (facts(kill=KillReason.SHUTDOWN), Ending(CANCELLED, error=SHUTDOWN_ERROR, release=True, interrupted=True)),
    (facts(kill=KillReason.LEASE), None),
    (facts(kill=KillReason.OVERSIZED, message_cap=150, max_output_bytes=100, parent="the executor"),
     Ending(ERR, error_type="ductline.PayloadTooLarge",
            error="step 'load' sent the executor a message of more than 150 bytes (payload_max_bytes 100 plus 50 "
                  "for the envelope); the child was killed")),
    (facts(kill=KillReason.GARBLED, broken="junk"),
     Ending(CRASH, error_type="ductline.ProtocolError",
            error="the child running step 'load' sent its parent a message it cannot take (junk); it was killed")),
    (facts(kill=KillReason.GARBLED),
     Ending(CRASH, error_type="ductline.ProtocolError",
            error=f"the child running step 'load' sent its parent a message it cannot take ({stalled_frame()}); "
                  "it was killed")),
    # died unasked, or cancelled by its executor
    (facts(exit_code=3), Ending(CRASH, error_type="ChildDied",
                                error="the child process running the step exited with code 3")),
    (facts(kill=KillReason.CANCEL, exit_code=-15),
     Ending(CRASH, error_type="ChildDied", error="the child process running the step exited with code -15")),
    (facts(exit_code=-signal.SIGKILL, limits=CPU),
     Ending(ERR, error_type="CpuLimitExceeded", error="attempt exceeded cpu_limit=2 CPU seconds")),
    (facts(exit_code=-signal.SIGKILL, limits=MEMORY),
     Ending(CRASH, error_type="ChildDied", error="the child process running the step exited with code -9")),
])
def test_ending(given, expected):
    assert ending(given) == expected
