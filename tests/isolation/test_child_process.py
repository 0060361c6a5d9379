"""The parent's handle on a child process (`ductline.execution.process.Child`): a
child that does not stop is killed with its group, a stopped one exits on its own,
and a child that cannot be started leaves no descriptor open."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from ductline.execution.process import Child


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_child_asked_to_stop_exits_by_itself_and_its_handle_closes_once():
    child = Child([], [])
    child.stop()
    child.join(60)
    assert child.process.returncode == 0
    assert child.reap() == 0  # closes its descriptors
    reused = os.pipe()  # new descriptors take the lowest free numbers: those just closed
    child.close()  # a second close must leave them alone
    for fd in reused:
        os.fstat(fd)
        os.close(fd)
    child.stop()  # a stop on a closed socket is dropped
    child.set_horizon(1.0)  # and a horizon is not written to a closed descriptor
    child.signal_group(signal.SIGKILL)  # its group is gone: nothing to signal
    assert child.exited()


def test_a_child_that_does_not_exit_in_time_is_killed_with_its_group():
    child = Child([], [])
    child.join(0)  # never asked to stop: it would serve tasks for ever
    assert child.process.returncode == -signal.SIGKILL
    assert child.conn.closed  # join closed its descriptors


def test_a_child_that_cannot_be_started_leaves_no_descriptor_open(monkeypatch, tmp_path):
    before = open_descriptors()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with pytest.raises(FileNotFoundError):
        Child([], [])
    assert open_descriptors() - before == set()  # its socket pair and horizon were closed
