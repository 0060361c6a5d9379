"""Pipelines whose steps log and print (step log tests; imported by workers as
``log_app`` from tests/apps)."""

from __future__ import annotations

import logging
import sys
import threading

from ductline import Pipeline

log = logging.getLogger("log_app.steps")
FLOOD_BYTES = 100 * 1024 * 1024


def chatty(x):
    log.debug("debug is below the default level")
    log.info("starting with %s", x)
    print("printed line one")
    print("printed", "line", "two")
    sys.stderr.write("to stderr\n")
    worker = threading.Thread(target=lambda: log.warning("from a thread of the step"))
    worker.start()
    worker.join()
    try:
        raise ValueError("handled")
    except ValueError:
        log.exception("caught it")
    return x + 1


def verbose(x):
    log.debug("debug kept: this step logs at DEBUG")
    return x * 2


def quiet(x):
    log.info("info dropped: this step logs at ERROR")
    log.error("error kept")
    return x


talk = (Pipeline("log_talk").start(chatty).chain(to=verbose, log_level="DEBUG")
        .chain(to=quiet, log_level="error"))


def flood(x):
    """Writes 100 MB: printed chunks and many logging lines."""
    chunk = "y" * (1024 * 1024 - 1) + "\n"
    for _ in range(FLOOD_BYTES // len(chunk) // 2):
        sys.stdout.write(chunk)
    line = "z" * 1023
    for _ in range(FLOOD_BYTES // 1024 // 2):
        log.warning(line)
    return {"survived": x}


flooding = Pipeline("log_flood").start(flood)


def flaky(x):
    from ductline import context

    attempt = context().attempt
    print(f"attempt {attempt} here")
    if attempt < 2:
        raise RuntimeError("first attempt fails")
    return x


retrying = Pipeline("log_retry", ).start(flaky, max_retry=2, retry_delay=0)


def wait_for_gate(path):
    """Prints, then waits for a file the test writes (a step may poll; a test may not sleep)."""
    import os
    import time

    print("waiting for the gate")
    while not os.path.exists(path):
        time.sleep(0.05)
    print("the gate is open")
    return path


gated = Pipeline("log_gated").start(wait_for_gate)


def elements(n):
    return list(range(n))


def announce(n):
    print(f"element {n}")
    return n


def gather(values):
    return values


fanned = Pipeline("log_fanned").start(elements).expand(to=announce).collapse(into=gather)
