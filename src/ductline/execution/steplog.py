"""Capturing what a step logs: records of stdlib `logging`, and what it prints to
``sys.stdout`` / ``sys.stderr``, per attempt, with time, level, logger and message.

A `Capture` collects one attempt's records, keeps to its level and its size cap
(`DEFAULT_MAX_BYTES`, 1 MiB of message text by default; what passes the cap is
counted, dropped, and marked by one last record), and hands them in batches to a
sink: in a child process a ``LOG`` message to the parent
(`ductline.execution.protocol`), inside the parent (async, thread and inline
steps) a list of the in-process executor. Because the cap is applied where the
records are made, a step that writes 100 MB costs its parent at most the cap.

`activate` routes records to the capture of the code that made them: the active
capture of the current `contextvars` context, or, in a child process (one attempt
at a time), the process-wide one, so threads a step starts are captured there too.
One logging handler on the root logger and one proxy on each of ``sys.stdout`` and
``sys.stderr`` do the routing; they are installed while some capture is active and
removed after the last one ends.

What is not captured: output that bypasses the Python streams (a C library or a
subprocess writing to file descriptor 1 or 2 directly), and, for steps that run
inside the parent (``isolation="thread"``, ``async def``), what threads they start
print.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TextIO

from ductline.loglevels import DEFAULT_LEVEL, DEFAULT_MAX_BYTES, check_level

STDOUT_LOGGER = "stdout"
STDERR_LOGGER = "stderr"
CUT_LOGGER = "ductline"
FLUSH_BYTES = 65_536        # a batch is sent once it holds this much text ...
FLUSH_SECONDS = 0.25        # ... or this long after its first record (``logs --follow``)
PARTIAL_LINE_BYTES = 65_536  # an unterminated printed line is emitted once this long
FORWARDED = "ductline_step_log"  # set on records re-logged by a parent: never captured again


@dataclass(frozen=True, slots=True)
class Record:
    """One captured record.

    Attributes:
        at_ms: when it was made, epoch milliseconds (the step's host clock).
        level: ``DEBUG`` .. ``CRITICAL``.
        logger: the logger's name; ``stdout`` / ``stderr`` for printed lines,
            ``ductline`` for the mark of a cut.
        message: the formatted message (with its traceback, if it logged one).
    """

    at_ms: int
    level: str
    logger: str
    message: str

    def wire(self) -> tuple[int, str, str, str]:
        return (self.at_ms, self.level, self.logger, self.message)


def cut_message(max_bytes: int, dropped: int) -> str:
    return f"log cut: this attempt's log passed its cap of {max_bytes} bytes; {dropped} more bytes were dropped"


class Capture:
    """The records of one attempt.

    Args:
        sink: called with each batch of records, in order (from the thread that
            filled the batch, or a timer's); it must not log.
        level: the lowest level kept (a `check_level` name).
        max_bytes: the most message text kept, in UTF-8 bytes.
    """

    def __init__(self, sink: Callable[[list[Record]], None], level: str = DEFAULT_LEVEL,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._sink = sink
        self.level = check_level(level)
        self.levelno = logging.getLevelName(self.level)
        self.max_bytes = max_bytes
        self.kept_bytes = 0
        self.dropped_bytes = 0
        self._batch: list[Record] = []
        self._batch_bytes = 0
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None
        # Every flush timer started and maybe not ended yet: `close` waits for them, so a
        # reused child's restore never finds one still running (it would retire the child).
        self._timers: list[threading.Timer] = []
        self._partial: dict[str, str] = {STDOUT_LOGGER: "", STDERR_LOGGER: ""}
        self._closed = False

    def add(self, levelno: int, logger: str, message: str, at: float | None = None) -> None:
        """Keep one record, if its level and the cap allow."""
        if levelno < self.levelno:
            return
        size = len(message.encode("utf-8", "replace"))
        with self._lock:
            if self._closed:
                return
            room = self.max_bytes - self.kept_bytes
            if size > room:
                self.dropped_bytes += size - max(room, 0)
                if room <= 0:
                    return
                message = message.encode("utf-8", "replace")[:room].decode("utf-8", "ignore")
                size = room
            self.kept_bytes += size
            when = time.time() if at is None else at
            self._batch.append(Record(int(when * 1000), logging.getLevelName(levelno), logger, message))
            self._batch_bytes += size
            if self._batch_bytes >= FLUSH_BYTES:
                self._flush()
            elif self._timer is None:
                self._timer = threading.Timer(FLUSH_SECONDS, self.flush)
                self._timer.daemon = True
                self._timer.start()
                self._timers = [t for t in self._timers if t.is_alive()] + [self._timer]

    def write(self, stream: str, text: str) -> None:
        """Printed text: complete lines become records (``stdout`` at INFO,
        ``stderr`` at WARNING); a long unterminated line is emitted in pieces."""
        levelno = logging.INFO if stream == STDOUT_LOGGER else logging.WARNING
        with self._lock:
            if self.kept_bytes >= self.max_bytes:  # past the cap: only count (a step printing 100 MB)
                self.dropped_bytes += len(text.encode("utf-8", "replace")) if levelno >= self.levelno else 0
                return
            pending = self._partial[stream] + text
            lines = pending.split("\n")
            rest = lines.pop()
            while len(rest) > PARTIAL_LINE_BYTES:
                lines.append(rest[:PARTIAL_LINE_BYTES])
                rest = rest[PARTIAL_LINE_BYTES:]
            self._partial[stream] = rest
            for line in lines:
                self.add(levelno, stream, line)

    def flush(self) -> None:
        """Hand the pending batch to the sink."""
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._batch:
            batch, self._batch, self._batch_bytes = self._batch, [], 0
            self._sink(batch)

    def close(self) -> None:
        """The attempt ended: emit unterminated lines and the mark of a cut, flush,
        and keep nothing more."""
        with self._lock:
            for stream, rest in self._partial.items():
                if rest:
                    self._partial[stream] = ""
                    self.add(logging.INFO if stream == STDOUT_LOGGER else logging.WARNING, stream, rest)
            if self.dropped_bytes:  # the mark goes in past the cap (the parent allows for it)
                self._batch.append(Record(int(time.time() * 1000), "WARNING", CUT_LOGGER,
                                          cut_message(self.max_bytes, self.dropped_bytes)))
            self._flush()
            self._closed = True
            timers, self._timers = self._timers, []
        # Cancelled above, they end at once; joined outside the lock, which a timer
        # that fired meanwhile is waiting for.
        for timer in timers:
            if timer is not threading.current_thread():
                timer.join()


# -- routing ---------------------------------------------------------------------------------
_current: contextvars.ContextVar[Capture | None] = contextvars.ContextVar("ductline_step_log", default=None)
_process_wide: Capture | None = None
_install_lock = threading.Lock()
_active = 0
_saved: dict[str, Any] = {}


def current() -> Capture | None:
    """The capture the calling code logs into, if any."""
    found = _current.get()
    return found if found is not None else _process_wide


class _Handler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        capture = current()
        if capture is None or getattr(record, FORWARDED, False):
            return
        try:
            message = record.getMessage()
            if record.exc_info:
                message = f"{message}\n{logging.Formatter().formatException(record.exc_info)}"
            elif record.exc_text:
                message = f"{message}\n{record.exc_text}"
            if record.stack_info:
                message = f"{message}\n{record.stack_info}"
        except Exception:  # noqa: BLE001 - a bad format string must not fail the step
            message = f"{record.msg!r} % {record.args!r}"
        capture.add(record.levelno, record.name, message, record.created)


class _Stream:
    """Stands in for ``sys.stdout`` / ``sys.stderr``: text written under a capture
    goes to it, anything else to the stream it replaced."""

    def __init__(self, name: str, original: TextIO) -> None:
        self._name = name
        self._original = original

    def write(self, text: str) -> int:
        capture = current()
        if capture is None:
            return self._original.write(text)
        capture.write(self._name, str(text))
        return len(text)

    def flush(self) -> None:
        if current() is None:
            self._original.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno, ...
        return getattr(self._original, name)


_handler = _Handler(logging.NOTSET)


def _install(levelno: int) -> None:
    global _active
    with _install_lock:
        root = logging.getLogger()
        if _active == 0:
            _saved["level"] = root.level
            _saved["stdout"], _saved["stderr"] = sys.stdout, sys.stderr
            sys.stdout = _Stream(STDOUT_LOGGER, sys.stdout)
            sys.stderr = _Stream(STDERR_LOGGER, sys.stderr)
            root.addHandler(_handler)
        # Records below the root's level never reach a handler: lower it while a
        # capture wants them (restored when the last capture ends).
        if root.level == logging.NOTSET or root.level > levelno:
            root.setLevel(levelno)
        _active += 1


def _uninstall() -> None:
    global _active
    with _install_lock:
        _active -= 1
        if _active:
            return
        root = logging.getLogger()
        root.removeHandler(_handler)
        root.setLevel(_saved.pop("level"))
        for name in ("stdout", "stderr"):
            original = _saved.pop(name)
            if isinstance(getattr(sys, name), _Stream):  # unless someone replaced it since
                setattr(sys, name, original)


@contextmanager
def activate(capture: Capture, *, process_wide: bool = False) -> Iterator[Capture]:
    """Route logging records and printed text to ``capture`` while the block runs,
    then close it (its last batch is handed to the sink before this returns).

    Args:
        process_wide: also take what other threads of this process log and print
            (a child process, which runs one attempt at a time).
    """
    global _process_wide
    _install(capture.levelno)
    token = _current.set(capture)
    if process_wide:
        _process_wide = capture
    try:
        yield capture
    finally:
        if process_wide:
            _process_wide = None
        _current.reset(token)
        _uninstall()
        capture.close()


# -- the parent's side ---------------------------------------------------------------------
_forward_log = logging.getLogger("ductline.step")


def forward(record: tuple[int, str, str, str], fields: dict[str, object]) -> None:
    """Re-log a record a step made into the parent's log (logger ``ductline.step``),
    at its level and time, with the job ``fields`` (``run_id``, ``job_id``,
    ``step``, ``attempt``) and ``step_logger``, so a JSON-lines log carries them."""
    at_ms, level, logger, message = record
    levelno = logging.getLevelName(level)
    if not isinstance(levelno, int) or not _forward_log.isEnabledFor(levelno):
        return
    extra = {**fields, "step_logger": logger, FORWARDED: True}
    entry = _forward_log.makeRecord(_forward_log.name, levelno, "(step)", 0, "%s", (message,), None, extra=extra)
    entry.created = at_ms / 1000
    entry.msecs = at_ms % 1000
    _forward_log.handle(entry)


class ParentGuard:
    """The parent's own check of the cap, for a child that does not keep it (its
    batches past ``max_bytes`` plus slack for the mark of a cut are dropped)."""

    SLACK_BYTES = 4096

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.taken_bytes = 0

    def take(self, records: list[tuple[int, str, str, str]]) -> list[tuple[int, str, str, str]]:
        kept = []
        for record in records:
            size = len(record[3].encode("utf-8", "replace"))
            if self.taken_bytes + size > self.max_bytes + self.SLACK_BYTES:
                continue
            self.taken_bytes += size
            kept.append(record)
        return kept
