"""Steps that carry NUL and lone surrogates through every text a run records: their
input and output, their error, their log lines (a level name too) and their run's
context (tests/runtime/test_hostile_text.py)."""

from __future__ import annotations

import logging

import ductline
from ductline import Pipeline

NUL_LEVEL, SURROGATE_LEVEL = 35, 36


def echo(value):
    return {"got": value, "and": ["\x00", "\ud800", "k\x00"]}


def logs(text):
    logging.addLevelName(NUL_LEVEL, "NO\x00TE")
    logging.addLevelName(SURROGATE_LEVEL, "TR\ud800CE")
    log = logging.getLogger("text\x00app")
    log.warning("warned %s", text)
    log.log(NUL_LEVEL, "at a NUL level")
    log.log(SURROGATE_LEVEL, "at a surrogate level")
    print("printed", text)
    log.warning("last")
    return "logged"


def keeps(value):
    ctx = ductline.context()
    ctx.set("value", value)
    ctx.set("k\\ud800", "its own")  # the six characters: a key like any other
    refused = []
    for key in ("k\ud800", "k\x00"):
        try:
            ctx.set(key, "another", overwrite=True)
        except TypeError as exc:
            refused.append(str(exc))
    return {"value": ctx.get("value"), "kept": ctx.get("k\\ud800"), "refused": refused}


def fails(text):
    raise ValueError(text)


echoing = Pipeline("text_echo").start(echo)
logging_text = Pipeline("text_logs").start(logs)
keeping = Pipeline("text_context").start(keeps)
failing = Pipeline("text_fails").start(fails, max_attempts=1)
