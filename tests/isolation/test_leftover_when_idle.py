"""A process an attempt leaves running in a session of its own
(``start_new_session=True``) is killed although no other attempt follows on the
slot: while the worker idles, when it stops right after the result, and after
``ductline.execute``. The child sends its result before it restores its state
(`ductline.execution.protocol.Task.result_first`); what the restore finds comes
after it, when the slot is already idle."""

from __future__ import annotations

import os

import iso_app

import ductline
from helpers import wait_for


def _gone(pid):
    return not iso_app.running(pid)


def test_an_idle_worker_kills_what_the_last_attempt_left(store, inprocess_worker):
    inprocess_worker(concurrency=1)
    handle = iso_app.left_alone.trigger(30, database=store)
    assert handle.wait(60) == "completed"
    pid = handle.output()
    try:
        wait_for(lambda: _gone(pid))  # no other job comes: the slot's child is retired idle
    finally:
        if iso_app.running(pid):
            os.kill(pid, 9)


def test_a_worker_stopped_right_after_the_result_kills_what_the_attempt_left(store, inprocess_worker):
    worker = inprocess_worker(concurrency=1)
    handle = iso_app.left_alone.trigger(30, database=store)
    assert handle.wait(60) == "completed"
    worker.request_stop()  # before the child's restore has reported what is left
    pid = handle.output()
    try:
        wait_for(lambda: _gone(pid))
    finally:
        if iso_app.running(pid):
            os.kill(pid, 9)


def test_execute_kills_what_the_last_attempt_left():
    result = ductline.execute(iso_app.left_alone, 30, concurrency=1)
    assert result.overall_status == "success", result
    pid = result.steps[0].output
    try:
        wait_for(lambda: _gone(pid))
    finally:
        if iso_app.running(pid):
            os.kill(pid, 9)
