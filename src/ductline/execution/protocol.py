"""The messages between a parent and the child (or thread) running an attempt.

Both drivers speak it: the worker (`ductline.runtime`) and the in-process
executor (`ductline.local`). On the wire a message is a pickled tuple whose first
item is its `Kind`; the parent turns what it reads into a typed message with
`receive`, which also guards it against a child that writes too much, or writes
something that is not this protocol at all (a step that wrote into an inherited
descriptor).

Parent to child: ``RUN`` (a `Task`), ``STOP``, and ``REPLY`` / ``REPLY_ERROR``
answering a request; to a child running an attempt, ``NEXT`` (a task to start
as soon as this one ends, `ductline.execution.prefetch`). Child to parent: ``READY`` once it imported its
apps, ``FATAL`` if it could not, ``REQUEST`` (context values, boundary crossings,
input chunks, a scaled timeout), ``LOG`` (a batch of the step's log records,
`ductline.execution.steplog`), one result per attempt, ``DONE`` or ``ERROR``,
tagged with the attempt's lease token so a late result of an earlier attempt is
never taken for the current one, ``STARTED`` (when, on the monotonic clock)
for a task sent with ``NEXT``, and ``RETIRE`` after a result sent before the
child restored its process state (`Task.result_first`) when it could not: it
starts no task any more, including one sent after that result.
"""

from __future__ import annotations

import io
import os
import pickle
import select
import struct
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from ductline.loglevels import DEFAULT_LEVEL, DEFAULT_MAX_BYTES

class Kind(StrEnum):
    RUN = "run"
    STOP = "stop"
    REPLY = "reply"
    REPLY_ERROR = "reply_error"
    READY = "ready"
    FATAL = "fatal"
    REQUEST = "request"
    DONE = "done"
    ERROR = "error"
    LOG = "log"
    NEXT = "next"
    STARTED = "started"
    RETIRE = "retire"


@dataclass(frozen=True, slots=True)
class Task:
    """What the parent sends the child for one attempt."""

    job_id: str
    run_id: str
    pipeline: str
    step: str
    attempt: int
    input: str              # JSON list of positional arguments
    deadline_ms: int | None  # database clock, for ductline.context().deadline
    lease_token: str
    max_output_bytes: int   # a larger output fails the attempt: PayloadTooLarge
    log_level: str = DEFAULT_LEVEL  # the worker's; a step's own log_level wins
    log_max_bytes: int = DEFAULT_MAX_BYTES  # of the attempt's captured log text
    memory_limit: int | None = None   # bytes of address space (RLIMIT_AS) for this attempt only
    cpu_limit: float | None = None    # CPU seconds (RLIMIT_CPU) for this attempt only
    fresh: bool = False               # isolation="fresh": the child is retired after this attempt
    # The result is sent before the child restores its process state (its parent
    # records it meanwhile); a child that cannot restore then says RETIRE and starts
    # no task sent after that result. False: the result says whether it restored.
    result_first: bool = False

    def with_deadline(self, deadline_ms: int | None) -> Task:
        """This task with another deadline (a task sent ahead learns its deadline as it starts)."""
        return Task(self.job_id, self.run_id, self.pipeline, self.step, self.attempt, self.input, deadline_ms,
                    self.lease_token, self.max_output_bytes, self.log_level, self.log_max_bytes, self.memory_limit,
                    self.cpu_limit, self.fresh, self.result_first)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as its constructor's arguments: one task crosses the pipe per
        # attempt, and the dataclass default (a state dict built from `fields()`)
        # cost the parent about four times as much.
        return (Task, (self.job_id, self.run_id, self.pipeline, self.step, self.attempt, self.input,
                       self.deadline_ms, self.lease_token, self.max_output_bytes, self.log_level,
                       self.log_max_bytes, self.memory_limit, self.cpu_limit, self.fresh, self.result_first))


@dataclass(frozen=True, slots=True)
class Ready:
    """The child imported its apps and waits for tasks."""

    pid: int


@dataclass(frozen=True, slots=True)
class Fatal:
    """The child could not import its apps; it exits."""

    error_type: str
    error: str
    traceback: str


# What a child asks its parent: a context value read or written, a boundary crossed, a
# chunk of its input's out-of-line values, the scaled timeout of its input (answered
# with the attempt's new deadline, epoch ms, which the step's context shows). Anything
# else is not the protocol (a step writing into the pipe), never a request answered.
REQUEST_KINDS = frozenset({"context_get", "context_set", "boundary", "payload_chunk", "timeout"})


@dataclass(frozen=True, slots=True)
class Request:
    """The running step asks its parent something; the parent answers with REPLY,
    which carries the request's ``seq`` back: a child numbers its requests, so an
    answer to a request a step gave up on (a signal interrupted its wait) is never
    taken as the answer to a later one, in that attempt or the next."""

    kind: str
    args: tuple[Any, ...]
    seq: int


def misplaced_fatal(message: Fatal) -> str:
    """Why a FATAL is not the protocol once a child has said READY (FATAL is a new
    child's answer instead of READY, when its apps do not import): a step wrote it."""
    return f"a FATAL message ({message.error_type[:100]!r}) from a child that had said it was ready"


@dataclass(frozen=True, slots=True)
class Done:
    """The attempt succeeded; ``output`` is its JSON text. ``retire`` is empty if
    the child restored its process state after the attempt, else why it could not
    (the parent then retires the child: `ductline.execution.cleanstate`)."""

    lease_token: str
    output: str
    retire: str = ""
    route_key: str = ""  # str(output), when a divert follows the step ("" otherwise)


@dataclass(frozen=True, slots=True)
class Failed:
    """The attempt raised."""

    lease_token: str
    error_type: str
    error: str
    traceback: str
    retire: str = ""


@dataclass(frozen=True, slots=True)
class Log:
    """A batch of the attempt's log records, in order: ``(at_ms, level, logger, message)``."""

    lease_token: str
    records: list[tuple[int, str, str, str]]


@dataclass(frozen=True, slots=True)
class Started:
    """The child started the task its parent sent ahead (``NEXT``), at ``at``
    (``time.monotonic()`` seconds, the clock the parent and its children share)."""

    lease_token: str
    at: float


@dataclass(frozen=True, slots=True)
class Retire:
    """After a result sent first (`Task.result_first`), the child could not restore
    its process state (``reason``): it starts no task any more, and one its parent
    sent after that result never began."""

    reason: str


Message = Ready | Fatal | Request | Done | Failed | Log | Started | Retire


class Oversized(Exception):
    """A child began a message longer than the parent reads; it is left unread (the
    caller kills the child: the rest of the message would be read as the next one).

    Attributes:
        before: the messages (and `Garbled` frames) completed ahead of it in the same
            read, in order. The caller handles them first: a `Garbled` among them
            says the stream was not this protocol any more, which also explains the
            size read after it.
    """

    def __init__(self, before: list[Message | Garbled] | None = None) -> None:
        super().__init__("a message longer than the parent reads")
        self.before: list[Message | Garbled] = before if before is not None else []


class Garbled(Exception):
    """What a child sent is not this protocol."""


class Connection(Protocol):
    """What `receive` needs of a connection (`multiprocessing.connection.Connection`)."""

    def recv_bytes(self, maxlength: int | None = None) -> bytes: ...


# -- writing ------------------------------------------------------------------------------
def run(task: Task) -> tuple[Any, ...]:
    return (Kind.RUN.value, task)


def dumps(message: tuple[Any, ...]) -> bytes:
    """A message as the bytes of one frame (`multiprocessing.connection`'s
    ``send_bytes`` adds the length header that ``recv`` and `Reader` read). Plain
    pickle: both sides send only values, never descriptors or processes."""
    return pickle.dumps(message, pickle.HIGHEST_PROTOCOL)


def next_task(task: Task, timeout_ms: int | None, offset_ms: float, seq: int) -> tuple[Any, ...]:
    """``task`` sent ahead, the ``seq``-th to this child: the child starts it when its
    attempt ends (unless it was taken back, `ductline.execution.prefetch.Ledger`) and
    works out its start and deadline itself -- ``int(at * 1000 + offset_ms)`` (``at``
    its monotonic start, ``offset_ms`` the database clock minus the monotonic clock),
    plus ``timeout_ms``."""
    return (Kind.NEXT.value, task, timeout_ms, offset_ms, seq)


def started(lease_token: str, at: float) -> tuple[Any, ...]:
    return (Kind.STARTED.value, lease_token, at)


def frame(data: bytes) -> bytes:
    """``data`` with the length header `multiprocessing.connection` writes (and
    `Reader` reads): several frames can then go out in one write."""
    if len(data) > 0x7FFFFFFF:
        return struct.pack("!iQ", -1, len(data)) + data
    return struct.pack("!i", len(data)) + data


def retire(reason: str) -> tuple[Any, ...]:
    return (Kind.RETIRE.value, reason)


def stop() -> tuple[Any, ...]:
    return (Kind.STOP.value,)


def reply(value: Any, seq: int) -> tuple[Any, ...]:
    return (Kind.REPLY.value, value, seq)


def reply_error(text: str, seq: int) -> tuple[Any, ...]:
    return (Kind.REPLY_ERROR.value, text, seq)


def ready(pid: int) -> tuple[Any, ...]:
    return (Kind.READY.value, pid)


def fatal(error_type: str, error: str, traceback: str) -> tuple[Any, ...]:
    return (Kind.FATAL.value, None, error_type, error, traceback)


def request(kind: str, args: tuple[Any, ...], seq: int) -> tuple[Any, ...]:
    return (Kind.REQUEST.value, kind, args, seq)


def done(lease_token: str, output: str, retire: str = "", route_key: str = "") -> tuple[Any, ...]:
    return (Kind.DONE.value, lease_token, output, retire, route_key)


def log(lease_token: str, records: list[tuple[int, str, str, str]]) -> tuple[Any, ...]:
    return (Kind.LOG.value, lease_token, records)


def failed(lease_token: str, error_type: str, error: str, traceback: str, retire: str = "") -> tuple[Any, ...]:
    return (Kind.ERROR.value, lease_token, error_type, error, traceback, retire)


# -- reading ------------------------------------------------------------------------------
def receive(conn: Connection, cap: int) -> Message:
    """One message from a child, read only if its length header says at most ``cap``
    bytes: a child writing hundreds of MiB cannot make the parent allocate them.

    Raises:
        Oversized: the message is longer than ``cap`` (left unread; kill the child).
        Garbled: the bytes are not a pickled message of this protocol.
        EOFError, OSError: the connection ended.
    """
    try:
        data = conn.recv_bytes(cap)
    except OSError as exc:
        if str(exc) == "bad message length":  # multiprocessing's "longer than maxlength"
            raise Oversized from None
        raise
    return decode(data)


class Reader:
    """Reads a child's messages without ever blocking on a partial one.

    `receive` reads a whole message once its first bytes arrived, so a child that
    writes a length header and then stops would hold its reader until it dies. A
    `Reader` keeps what arrived in a buffer of its own and returns only complete
    messages; it reads for at most ``budget_seconds`` per call, then lets its
    caller (a worker loop, an event loop) go on. The framing is
    `multiprocessing.connection`'s, which the child writes with ``send``: a
    signed 4-byte big-endian length, or -1 and an unsigned 8-byte length.

    Args:
        fd: the parent's end of the socket or pipe.
        budget_seconds: the longest one `read` keeps reading a long message.
    """

    CHUNK_BYTES = 1 << 16

    def __init__(self, fd: int, budget_seconds: float = 0.02) -> None:
        self._fd = fd
        self._budget = budget_seconds
        self._buffer = bytearray()
        # Each read lands in this one buffer: a fresh bytes object per read, sized for
        # the longest chunk and shrunk to what came, cost the worker's loop a mapping
        # and an unmapping of memory for every result (seen in a profile of the drain).
        self._chunk = bytearray(self.CHUNK_BYTES)
        self._progress_at = 0.0  # when bytes last arrived (time.monotonic())

    def pending_since(self) -> float | None:
        """When the last bytes of an incomplete frame arrived (``time.monotonic()``
        seconds), or ``None`` if no frame is incomplete. A frame that stops arriving
        is bytes out of step with the protocol (`ductline.model.endings.FRAME_BOUND_SECONDS`)."""
        return self._progress_at if self._buffer else None

    def read(self, cap: int) -> list[Message | Garbled]:
        """The messages completed by what can be read now, in order (a `Garbled` for
        each one that is not this protocol). Call when the descriptor is readable;
        ``cap`` is the longest message read, in bytes.

        Raises:
            Oversized: a message is announced longer than ``cap`` (kill the child);
                its ``before`` holds the messages completed ahead of it.
            EOFError: the connection ended (messages before the end are returned by
                the calls before).
            OSError: reading failed.
        """
        end = time.monotonic() + self._budget
        found: list[Message | Garbled] = []
        while True:
            size = os.readv(self._fd, [self._chunk])
            if not size:
                if found:
                    return found  # the end is seen by the next call
                raise EOFError
            with memoryview(self._chunk) as chunk:
                self._buffer += chunk[:size]
            self._progress_at = time.monotonic()
            self._frames(cap, found)
            if found or time.monotonic() >= end or not _readable(self._fd):
                return found

    def _frames(self, cap: int, frames: list[Message | Garbled]) -> None:
        """Append the complete frames of the buffer to ``frames``."""
        while True:
            if len(self._buffer) < 4:
                return
            (size,) = struct.unpack("!i", self._buffer[:4])
            start = 4
            if size == -1:
                if len(self._buffer) < 12:
                    return
                (size,) = struct.unpack("!Q", self._buffer[4:12])
                start = 12
            if size < 0:
                # No frame has a negative length: bytes out of step, never a message
                # too large. What follows cannot be framed; the caller kills the child.
                frames.append(Garbled(f"a frame header of negative length {size}"))
                self._buffer.clear()
                return
            if size > cap:
                raise Oversized(frames)
            if len(self._buffer) < start + size:
                return
            with memoryview(self._buffer) as view:
                data = bytes(view[start:start + size])
            del self._buffer[:start + size]
            try:
                frames.append(decode(data))
            except Garbled as exc:
                frames.append(exc)


def _readable(fd: int) -> bool:
    # poll, not select: select refuses descriptors from 1024 on, which a worker whose
    # apps hold many files gives its children's pipes.
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def decode(data: bytes) -> Message:
    """The message of one frame's bytes.

    Raises:
        Garbled: the bytes are not a pickled message of this protocol.
    """
    try:
        raw = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # noqa: BLE001 - anything the step wrote into the pipe
        raise Garbled(f"{type(exc).__name__}: {exc!r:.200}") from None
    try:
        return parse(raw)
    except Garbled:
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. the repr of a hostile structure
        raise Garbled(f"unreadable message ({type(exc).__name__})") from None


class _PlainUnpickler(pickle.Unpickler):
    """Reads only plain values (tuples, lists, dicts, text, numbers, None): a child's
    messages carry nothing else, and refusing every class means the parent never
    imports or calls code named by what a child sent."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a child's message may not name {module!r:.60}.{name!r:.60}")


def parse(raw: Any) -> Message:
    """The typed message of a wire tuple.

    Raises:
        Garbled: ``raw`` is not a well-formed message from a child.
    """
    if not isinstance(raw, tuple) or not raw or not isinstance(raw[0], str):
        raise Garbled(f"unexpected message {raw!r:.100}")
    kind, fields = raw[0], raw[1:]
    if kind == Kind.READY and len(fields) == 1 and isinstance(fields[0], int):
        return Ready(fields[0])
    if kind == Kind.FATAL and len(fields) == 4 and _texts(fields[1:]):
        return Fatal(*fields[1:])
    if kind == Kind.REQUEST and len(fields) == 3 and fields[0] in REQUEST_KINDS \
            and isinstance(fields[1], (tuple, list)) and type(fields[2]) is int:
        return Request(fields[0], tuple(fields[1]), fields[2])
    if kind == Kind.DONE and len(fields) in (2, 3, 4) and _texts(fields):
        return Done(*fields)
    if kind == Kind.ERROR and len(fields) in (4, 5) and _texts(fields):
        return Failed(*fields)
    if kind == Kind.RETIRE and len(fields) == 1 and isinstance(fields[0], str):
        return Retire(fields[0])
    if kind == Kind.STARTED and len(fields) == 2 and isinstance(fields[0], str) and type(fields[1]) is float:
        return Started(fields[0], fields[1])
    if kind == Kind.LOG and len(fields) == 2 and isinstance(fields[0], str) and isinstance(fields[1], list) \
            and all(_log_record(r) for r in fields[1]):
        return Log(fields[0], fields[1])
    raise Garbled(f"unexpected message {raw!r:.100}")


def _log_record(item: Any) -> bool:
    return (isinstance(item, tuple) and len(item) == 4 and isinstance(item[0], int)
            and all(isinstance(f, str) for f in item[1:]))


def _texts(fields: tuple[Any, ...]) -> bool:
    return all(isinstance(f, str) for f in fields)
