"""Logging setup for the CLI: text or JSON lines, with the job fields every line
about a job carries (``run_id``, ``job_id``, ``step``, ``attempt``).

Both formats are terminal-safe: a step's text (its forwarded log records, its
errors) cannot put a control character on the worker's output. Text lines show
them escaped (`ductline.safetext.printable`) and indent a record's further lines
(`terminal_lines`); JSON lines are ASCII, every control character written as a
``\\u`` escape.
"""

from __future__ import annotations

import json
import logging
import sys

from ductline import safetext

JOB_FIELDS = ("run_id", "job_id", "step", "attempt")
CONTINUATION = "    "  # before each further line of one record
# A run's end (`ductline.observability.runlog`): in the text line's message, and
# fields of their own in a JSON line.
RUN_FIELDS = ("pipeline", "status", "duration_seconds")


def terminal_lines(text: str) -> str:
    """One record for a terminal or a text log: its control characters escaped
    (`ductline.safetext.printable`) and its further lines indented, so that no text
    a step wrote can pass for a line of its own."""
    return safetext.printable(text).replace("\n", "\n" + CONTINUATION)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extras = [f"{k}={getattr(record, k)}" for k in (*JOB_FIELDS, "step_logger") if hasattr(record, k)]
        return terminal_lines(f"{text} [{' '.join(extras)}]" if extras else text)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                "message": record.getMessage()}
        for key in (*JOB_FIELDS, *RUN_FIELDS):
            if hasattr(record, key):
                data[key] = getattr(record, key)
        if hasattr(record, "step_logger"):  # a record a step logged (ductline.execution.steplog)
            data["step_logger"] = record.step_logger
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        # ensure_ascii (json's default) is what keeps the line free of raw control
        # characters: it escapes everything outside printable ASCII, DEL included.
        return json.dumps(data, ensure_ascii=True)


def configure(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger("ductline")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
