"""The parent/child message protocol (`ductline.execution.protocol`): typed
messages, the length cap, and what is not the protocol."""

from __future__ import annotations

import pickle
from multiprocessing import Pipe

import pytest

from ductline.execution import protocol
from ductline.execution.protocol import Done, Failed, Fatal, Garbled, Oversized, Ready, Request


@pytest.mark.parametrize("wire, message", [
    (protocol.ready(42), Ready(42)),
    (protocol.fatal("ImportError", "no module", "tb"), Fatal("ImportError", "no module", "tb")),
    (protocol.request("context_get", ("k",), 3), Request("context_get", ("k",), 3)),
    (("request", "payload_chunk", ["id", 0], 4), Request("payload_chunk", ("id", 0), 4)),
    (protocol.done("token", "[1]"), Done("token", "[1]")),
    (protocol.failed("token", "ValueError", "bad", "tb"), Failed("token", "ValueError", "bad", "tb")),
    (protocol.done("token", "[1]", "a thread is still running"), Done("token", "[1]", "a thread is still running")),
    (protocol.done("token", '"LARGE"', "", "Size.LARGE"), Done("token", '"LARGE"', "", "Size.LARGE")),
])
def test_messages_parse_to_their_types(wire: tuple[object, ...], message: protocol.Message) -> None:
    assert protocol.parse(wire) == message


@pytest.mark.parametrize("wire", [
    "done", (), (1, 2), ("done",), ("done", "token"), ("done", "token", 5), ("done", "t", "o", "retire", "key", "extra"), ("done", "t", "o", "retire", 5),
    ("error", "token", "ValueError", "bad"), ("ready", "pid"), ("request", 3, ()), ("reply", True),
    ("unknown", 1, 2, 3), ("request", "nosuch", (), 1), ("request", "context_get", ("k",)),
])
def test_malformed_messages_are_garbled(wire: object) -> None:
    with pytest.raises(Garbled):
        protocol.parse(wire)


def test_receive_reads_up_to_the_cap_and_no_further() -> None:
    parent, child = Pipe()
    try:
        child.send(protocol.done("token", "x" * 100))
        assert protocol.receive(parent, 10_000) == Done("token", "x" * 100)
        child.send(protocol.done("token", "x" * 10_000))
        with pytest.raises(Oversized):
            protocol.receive(parent, 1_000)
    finally:
        parent.close()
        child.close()


def test_bytes_that_are_not_a_pickle_are_garbled() -> None:
    parent, child = Pipe()
    try:
        child.send_bytes(b"not a pickle")
        with pytest.raises(Garbled):
            protocol.receive(parent, 1_000)
        child.send_bytes(pickle.dumps({"a": 1}))
        with pytest.raises(Garbled):
            protocol.receive(parent, 1_000)
    finally:
        parent.close()
        child.close()


def test_a_closed_pipe_ends_the_reading() -> None:
    parent, child = Pipe()
    child.close()
    with pytest.raises(EOFError):
        protocol.receive(parent, 1_000)
    parent.close()


def test_a_message_naming_a_class_is_garbled_and_nothing_is_imported() -> None:
    import datetime

    parent, child = Pipe()
    child.send(("done", "token", datetime.date(2020, 1, 1)))
    with pytest.raises(Garbled, match="may not name"):
        protocol.receive(parent, 1 << 20)


def test_the_reader_never_waits_for_the_rest_of_a_message() -> None:
    import os
    import struct

    read_end, write_end = os.pipe()
    reader = protocol.Reader(read_end)
    whole = pickle.dumps(protocol.done("token", "[1]"))
    framed = struct.pack("!i", len(whole)) + whole
    os.write(write_end, framed[:7])  # a header and part of the body: nothing complete yet
    assert reader.read(1 << 20) == []
    os.write(write_end, framed[7:] + framed + struct.pack("!i", 5) + b"junk!")
    found = reader.read(1 << 20)
    assert found[:2] == [Done("token", "[1]"), Done("token", "[1]")]
    assert isinstance(found[2], Garbled)
    os.write(write_end, struct.pack("!i", -1) + struct.pack("!Q", 1 << 40))
    with pytest.raises(Oversized):
        reader.read(1 << 20)
    os.close(write_end)
    with pytest.raises(EOFError):
        protocol.Reader(read_end).read(1 << 20)
    os.close(read_end)


def test_a_task_crosses_the_pipe_with_every_field() -> None:
    """A task is pickled as its constructor's arguments (`Task.__reduce__`): every
    field, set to a value other than its default, arrives as sent."""
    import dataclasses

    from ductline.execution.protocol import Task

    values = {"job_id": "j", "run_id": "r", "pipeline": "p", "step": "s", "attempt": 3, "input": "[1]",
              "deadline_ms": 17, "lease_token": "t", "max_output_bytes": 99, "log_level": "DEBUG",
              "log_max_bytes": 5, "memory_limit": 1 << 30, "cpu_limit": 2.5, "fresh": True,
              "result_first": True}
    assert set(values) == {f.name for f in dataclasses.fields(Task)}  # a new field needs a value here
    task = Task(**values)  # type: ignore[arg-type]
    parent, child = Pipe()
    try:
        parent.send_bytes(protocol.dumps(protocol.run(task)))
        kind, received = child.recv()
    finally:
        parent.close()
        child.close()
    assert kind == "run" and received == task


def test_a_reader_on_a_descriptor_above_1023_reads_a_message_longer_than_the_pipe() -> None:
    """A worker whose apps hold many files gives its children's pipes descriptors of
    1024 and more: the reader must not wait on them with select() (which refuses them)."""
    import os
    import resource
    import threading

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    high = 1500
    if soft <= high:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    parent, child = Pipe(duplex=False)
    fd = os.dup2(parent.fileno(), high)
    output = "x" * 300_000  # several reads: a pipe holds 64 KiB
    writer = threading.Thread(target=lambda: child.send_bytes(protocol.dumps(protocol.done("t", output))))
    try:
        writer.start()
        reader = protocol.Reader(fd, budget_seconds=30)
        messages: list[object] = []
        while not messages:
            messages = reader.read(1 << 20)
        assert messages == [Done("t", output)]
    finally:
        writer.join()
        os.close(fd)
        parent.close()
        child.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_an_oversized_header_hands_back_the_frames_read_before_it() -> None:
    import os
    import struct

    read_end, write_end = os.pipe()
    try:
        reader = protocol.Reader(read_end)
        whole = pickle.dumps(protocol.done("token", "[1]"))
        # a result, then junk whose first bytes read as a 5-byte frame, then bytes that
        # read as a header of -1 and an 8-byte size past the cap
        os.write(write_end, struct.pack("!i", len(whole)) + whole + struct.pack("!i", 5) + b"hello" + b"\xff" * 12)
        with pytest.raises(Oversized) as raised:
            reader.read(1 << 20)
        [done, junk] = raised.value.before
        assert done == Done("token", "[1]") and isinstance(junk, Garbled)
    finally:
        os.close(read_end)
        os.close(write_end)


@pytest.mark.parametrize("header", [b"\xff\xff\xff\xfe", b"\x80\x00\x00\x00"])
def test_a_negative_length_is_garbled_not_oversized(header: bytes) -> None:
    import os

    read_end, write_end = os.pipe()
    try:
        os.write(write_end, header + b"junk that follows")
        [found] = protocol.Reader(read_end).read(1 << 20)
        assert isinstance(found, Garbled) and "negative length" in str(found)
    finally:
        os.close(read_end)
        os.close(write_end)
