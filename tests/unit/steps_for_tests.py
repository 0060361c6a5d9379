"""Module-level steps for the unit tests of the DSL (the DSL rejects lambdas and
nested functions, so every step a test pipeline uses lives here)."""

from __future__ import annotations

import itertools
import os
import uuid

import ductline

_counter = itertools.count()


def unique_name(prefix: str = "unit") -> str:
    """A pipeline name no other test uses (the pipeline registry is global)."""
    return f"{prefix}_{os.getpid()}_{next(_counter)}_{uuid.uuid4().hex[:8]}"


def a(x=None):
    return x


def b(x=None):
    return x


def c(x=None):
    return x


def d(x=None):
    return x


def e(x=None):
    return x


def f(x=None):
    return x


def g(x=None):
    return x


def h(x=None):
    return x


async def async_step(x=None):
    return x


class ClassStep(ductline.Step):
    def execute(self):
        return self.input


class NotAStep:
    """Has an ``execute`` method but does not subclass ``ductline.Step``."""

    def execute(self):
        return None


lambda_step = lambda x: x  # noqa: E731 - deliberately a lambda


def make_nested():
    def nested(x):
        return x

    return nested


nested_step = make_nested()


def shadowed(x=None):
    return x


# Keep the first definition under another name, then rebind `shadowed`: the first
# function is no longer what `steps_for_tests:shadowed` names.
shadowed_original = shadowed


def shadowed(x=None):  # noqa: F811 - deliberate rebinding
    return x


# The DESIGN.md example's step names.
def query_users(n=None):
    return list(range(n or 0))


def load_user(user):
    return user


def source_a(user):
    return user


def source_b(user):
    return user


def collate(outputs):
    return outputs


def update_user(outputs):
    return outputs


def report(outputs):
    return outputs


def halt_handler(reasons):
    return reasons
