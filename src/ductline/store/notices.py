"""What the store says about how it reaches the database (a connection pooler found
while ``database_pooling`` is unset, ...): each notice once per process, at a level
that depends on what the process is.

The rule, here and nowhere else: a process that stays up -- a worker, the
dashboard, ``ductline run`` (it runs a worker), an application that triggers runs
-- says each notice once, at WARNING, where its operator reads its log (as a Python
warning on stderr in a program that configured no logging: `ductline.logreach`). A one-shot
command of the command line (``ductline runs``, ``show``, ``trigger``, ...) says
it at DEBUG: the store works the same either way, and a line repeated by every
command would be noise an operator learns to skip (``--log-level DEBUG`` shows
it). The command line says which kind of process it is (`one_shot`) before any
store is opened; a process that says nothing stays up.
"""

from __future__ import annotations

import logging
import threading

from ductline.logreach import warn

_lock = threading.Lock()
_said: set[str] = set()
_one_shot = False


def one_shot(value: bool = True) -> None:
    """Mark this process a one-shot command (``False``: one that stays up, the
    default): its notices are logged at DEBUG."""
    global _one_shot
    _one_shot = value


def level() -> int:
    """The level a notice of this process is logged at (`logging.WARNING` or
    `logging.DEBUG`; see the module docstring)."""
    return logging.DEBUG if _one_shot else logging.WARNING


def once(logger: logging.Logger, key: str, message: str) -> bool:
    """Log ``message`` on ``logger`` at `level`, unless a notice with ``key`` was
    logged by this process already; at WARNING in a program whose logging shows no
    ductline record, a `UserWarning` instead. Returns whether it was said now."""
    with _lock:
        if key in _said:
            return False
        _said.add(key)
    if _one_shot:
        logger.log(logging.DEBUG, message)
    else:
        warn(logger, message)
    return True

