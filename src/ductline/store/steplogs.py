"""Step logs in the database: the store verbs that write an attempt's captured
records (`ductline.execution.steplog`) and read a run's.

Rows belong to their run: `ductline.store.retention` deletes them with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

from ductline.codec import clean_text
from ductline.store.session import Dialect

DEFAULT_READ_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class StepLogRecord:
    """One stored record.

    Attributes:
        job_id, attempt, seq: the attempt it belongs to and its place in it (from 0).
        step, scope: the step run (``scope`` ``""`` at top level, ``"2"`` for
            element 2 of an expand).
        at_ms: when the step made it, epoch milliseconds.
        level: ``DEBUG`` .. ``CRITICAL``.
        logger: the logger's name (``stdout`` / ``stderr`` for printed lines).
        message: its text.
    """

    job_id: str
    attempt: int
    seq: int
    step: str
    scope: str
    at_ms: int
    level: str
    logger: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "attempt": self.attempt, "seq": self.seq, "step": self.step,
                "scope": self.scope, "at_ms": self.at_ms, "level": self.level, "logger": self.logger,
                "message": self.message}


def append(dialect: Dialect, job_id: str, attempt: int, lease_token: str, first_seq: int,
           records: Iterable[tuple[int, str, str, str]]) -> None:
    """Store records ``(at_ms, level, logger, message)`` of an attempt, numbered
    from ``first_seq``; nothing is written unless the attempt still holds
    ``lease_token``. Every text is made storable (`ductline.codec.clean_text`): the
    batch goes as one JSON parameter, which the database decodes itself, so the
    escaping of bound strings does not reach it -- a NUL or a lone surrogate left in
    any field (a level name the step gave `logging.addLevelName`, too) would cost the
    whole batch on PostgreSQL and store a cut or undecodable text on SQLite.

    Raises:
        StoreError: the database failed (nothing of the batch is written).
    """
    # One statement per batch (its records as one JSON parameter): a batch of a
    # thousand short lines costs the worker's loop one round trip, not a thousand.
    rows = [[at_ms, clean_text(level), clean_text(logger), clean_text(message)]
            for at_ms, level, logger, message in records]
    if rows:
        with dialect.transaction() as s:
            s.execute("step_log_append", {"job_id": job_id, "attempt": attempt, "lease_token": lease_token,
                                          "first_seq": first_seq, "records": json.dumps(rows)})


def of_run(dialect: Dialect, run_id: str, step: str | None = None,
           limit: int = DEFAULT_READ_LIMIT) -> list[StepLogRecord]:
    """A run's records (of ``step`` only, when given), oldest first, at most ``limit``.

    Raises:
        StoreError: the database failed.
    """
    with dialect.reader() as s:
        rows = s.fetch("step_logs_of_run", {"run_id": run_id, "step": step, "limit": limit})
    return [StepLogRecord(r["job_id"], int(r["attempt"]), int(r["seq"]), r["step"], r["scope"] or "",
                          int(r["at_ms"]), r["level"], r["logger"], r["message"]) for r in rows]
