"""One attempt's conversation in the in-process executor (`ductline.local.childattempt`),
against a stand-in child on a real socket pair: what a child writes after its result
in the same read decides whether the child is reused, never the result."""

from __future__ import annotations

import asyncio
import os
import pickle
import struct
import threading
from multiprocessing import Pipe

import pytest

from ductline.execution import protocol
from ductline.execution.enforcer import Enforcer
from ductline.local.childattempt import ChildAttempt
from ductline.local.outcome import Limit
from ductline.model.endings import Reported

TOKEN = "token-1"


class SocketChild:
    """The parent's view of a child: its end of the socket, a reader, signals noted."""

    def __init__(self) -> None:
        self.conn, self.far = Pipe()
        self.reader = protocol.Reader(self.conn.fileno())
        self.pid = os.getpid()
        self.is_thread = False
        self.signals: list[int] = []

    def send(self, message: object) -> None:
        self.conn.send(message)

    def signal_group(self, sig: int) -> None:
        self.signals.append(sig)


def frame(data: bytes) -> bytes:
    return struct.pack("!i", len(data)) + data


def reply_with(child: SocketChild, tail: bytes) -> threading.Thread:
    """The far side: once the task arrives, its result and ``tail`` in one write."""
    def answer() -> None:
        child.far.recv()  # the RUN message
        os.write(child.far.fileno(), frame(pickle.dumps(protocol.done(TOKEN, "[1]"))) + tail)
    thread = threading.Thread(target=answer)
    thread.start()
    return thread


@pytest.mark.parametrize("tail, reusable", [
    (b"", True),
    (struct.pack("!i", 5) + b"hello", False),                 # junk after the result
    (struct.pack("!i", 5) + b"hello" + b"\xff" * 12, False),  # junk, then a size past the cap
], ids=["nothing", "junk", "junk_then_a_huge_size"])
def test_what_follows_a_result_in_the_same_read_decides_only_the_reuse(tail: bytes, reusable: bool) -> None:
    child = SocketChild()
    enforcer = Enforcer(1.0, lambda: None)
    task = protocol.Task("job", "run", "p", "step", 1, "[]", None, TOKEN, 1 << 20)

    async def attempt():
        loop = asyncio.get_running_loop()
        thread = reply_with(child, tail)
        running = ChildAttempt(child, 1, loop.create_future(), enforcer, 1 << 20)
        try:
            return await running.run(task, Limit(loop.time(), 30.0), lambda kind, args: None), running.reusable
        finally:
            thread.join()

    try:
        report, reused = asyncio.run(attempt())
    finally:
        enforcer.stop()
        child.conn.close()
        child.far.close()
    assert report is not None
    assert (report.kind, report.output, reused) == (Reported.DONE, "[1]", reusable)
