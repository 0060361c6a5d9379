"""Pipelines for the large-payload tests (tests/payloads). Imported by workers as
``payload_app`` from tests/apps.

``blob(size, seed)`` is a string whose JSON encoding is exactly ``size`` bytes
(including its two quotes), with varied content, so a test can aim at the inline
limit byte for byte.
"""

from __future__ import annotations

import hashlib
import random
import string

from ductline import Pipeline

ALPHABET = string.ascii_letters + string.digits + " .,;:-_/"


_TABLE = bytes(ord(ALPHABET[i % len(ALPHABET)]) for i in range(256))


def blob(size: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return rng.randbytes(size - 2).translate(_TABLE).decode("ascii")


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def produce(spec):
    size, seed = spec
    return blob(size, seed)


def relay(value):
    return value


def digests(values):
    return [[len(v), digest(v)] for v in values]


# produce -> relay: the relay gets produce's output and returns it as the run's output.
relayed = Pipeline("pl_relay").start(produce).chain(to=relay)

# One element per [size, seed]; the collapse gets every element's output in order.
def specs(items):
    return items


expanded = Pipeline("pl_expand").start(specs).expand(to=produce).collapse(into=digests)


# Elements that are themselves large: each element's input goes out of line.
def big_elements(spec):
    count, size = spec
    return [blob(size, seed) for seed in range(count)]


def element_digest(value):
    return [len(value), digest(value)]


big_elements_pipeline = (Pipeline("pl_big_elements").start(big_elements)
                         .expand(to=element_digest).collapse(into=relay, name="gathered"))


# A divide whose branches return one large and one small output, combined.
def large_branch(spec):
    return blob(spec[0], 1)


def small_branch(spec):
    return blob(spec[1], 2)


combined = (Pipeline("pl_combine").start(relay)
            .divide(to=[large_branch, small_branch]).combine(into=digests))

# The run's arguments are its output.
echoed = Pipeline("pl_echo").start(relay)

# An output above the hard limit, with retries to spare.
too_big = Pipeline("pl_too_big").start(produce, max_retry=3, retry_delay=0)


# An error message larger than the worker reads from a child in one message.
def loud_failure(size):
    raise RuntimeError("x" * size)


loud = Pipeline("pl_loud").start(loud_failure, max_retry=1)


# The same hand-off to a thread-isolated step (its input is read through the same requests).
threaded = Pipeline("pl_thread").start(produce).chain(to=relay, isolation="thread")
