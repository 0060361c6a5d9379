"""Steps that write into their own child's channel to the parent (tests/isolation
fuzzing): random bytes, or messages of the protocol's shape carrying hostile text."""

from __future__ import annotations

import os
import struct
from multiprocessing.connection import Connection

from ductline import Pipeline


def _channel_fd():
    """The child's socket to its parent (its only socket)."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                return int(name)
        except OSError:
            continue
    raise RuntimeError("no socket found")


def _text(item):
    return bytes.fromhex(item).decode("utf-8", "surrogatepass")


def hostile(spec):
    fd = _channel_fd()
    if spec["mode"] == "raw":
        data = bytes.fromhex(spec["hex"])
        if spec.get("framed"):  # a complete frame around random bytes
            data = struct.pack("!i", len(data)) + data
        os.write(fd, data)
        return "wrote"
    texts = [_text(t) for t in spec["texts"]]
    if spec.get("huge") and texts:
        texts[0] += "\x00\ud800" * spec["huge"]
    kind = spec["kind"]
    if kind == "request":
        args = [spec["number"], *texts] if spec["number"] % 2 else texts
        message = (kind, spec["request"], tuple(args), spec["number"])  # numbered as a child numbers them
    elif kind == "ready":
        message = (kind, spec["number"])
    else:
        message = (kind, *texts)
    conn = Connection(os.dup(fd))
    try:
        conn.send(message)
    finally:
        conn.close()
    return "sent"


def stall(seconds):
    """A header announcing more than is ever written: the parent must not wait for it."""
    fd = _channel_fd()
    os.write(fd, struct.pack("!i", 1000) + b"only part of it")
    import time

    time.sleep(seconds)
    return "stalled"


def add_one(x):
    return x + 1


fuzzed = Pipeline("fuzz_hostile").start(hostile, max_retry=1, max_crash=1, timeout=20)
stalled = Pipeline("fuzz_stall").start(stall, max_retry=1, max_crash=1, timeout=30)
healthy = Pipeline("fuzz_healthy").start(add_one)


def forge_fatal(seconds):
    """A well-formed FATAL frame (a child's answer instead of READY when its apps do not
    import) written in the middle of an attempt, then a step that goes on running."""
    import pickle
    import time

    frame = pickle.dumps(("fatal", None, "FakeType", "forged", "tb"))
    os.write(_channel_fd(), struct.pack("!i", len(frame)) + frame)
    time.sleep(seconds)
    return "slept"


forged_fatal = Pipeline("fuzz_forged_fatal").start(forge_fatal, max_retry=0, max_crash=0, timeout=60)


def _mark():
    import ductline

    context = ductline.context()
    with open(os.environ["FUZZ_MARKS"], "a", encoding="utf-8") as marks:
        marks.write(f"{context.run_id} {context.step} {context.attempt}\n")


def junk_then_return(_):
    """Writes a negative frame length into its channel and returns at once, so the
    child may start the job sent ahead to it before its parent kills it."""
    _mark()
    os.write(_channel_fd(), b"\xff\xff\xff\xfe" + b"x" * 20)
    return "junk"


def marked(i):
    _mark()
    return i


junk_writer = Pipeline("fuzz_junk_writer").start(junk_then_return, max_retry=0, max_crash=0)
marked_steps = Pipeline("fuzz_marked").start(marked)


def garble_result(spec):
    """Writes the bytes of ``spec["prefix"]`` (hex) into its channel, then returns: its
    result frame follows them and cannot be framed. Each attempt notes its pid."""
    with open(spec["pids"], "a", encoding="utf-8") as pids:
        pids.write(f"{os.getpid()}\n")
    os.write(_channel_fd(), bytes.fromhex(spec["prefix"]))
    return "after the junk"


# No step timeout: only the frame bound ends such an attempt. A protocol error is
# retried once (a crash); bytes that read as a size past the cap are a payload too
# large, which is never retried.
garbled = Pipeline("fuzz_garbled").start(garble_result, max_retry=2, retry_delay=0, max_crash=2)


def whoami(_):
    return os.getpid()


pid_of_child = Pipeline("fuzz_whoami").start(whoami)


def scribble(n):
    """Writes a frame's worth of junk to every low descriptor it may guess, and to
    stdout, then returns: none of them is the channel to its parent."""
    for fd in range(3, 64):
        try:
            os.write(fd, struct.pack("!i", 5) + b"hello")
        except OSError:
            continue
    print("\x00\x00\x00\x05hello")
    return n + 1


scribbler = Pipeline("fuzz_scribbler").start(scribble, max_retry=1, max_crash=1, timeout=30)
