"""Logging setup for the CLI: text or JSON lines, with the job fields every line
about a job carries (``run_id``, ``job_id``, ``step``, ``attempt``)."""

from __future__ import annotations

import json
import logging
import sys

JOB_FIELDS = ("run_id", "job_id", "step", "attempt")


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extras = [f"{k}={getattr(record, k)}" for k in (*JOB_FIELDS, "step_logger") if hasattr(record, k)]
        return f"{text} [{' '.join(extras)}]" if extras else text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                "message": record.getMessage()}
        for key in JOB_FIELDS:
            if hasattr(record, key):
                data[key] = getattr(record, key)
        if hasattr(record, "step_logger"):  # a record a step logged (ductline.execution.steplog)
            data["step_logger"] = record.step_logger
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data)


def configure(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger("ductline")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
