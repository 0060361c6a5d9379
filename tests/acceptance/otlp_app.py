"""The pipeline of the OTLP export test (a worker imports this file)."""

from ductline import Pipeline


def greet(name):
    return f"hello {name}"


greeting = Pipeline("otlp_greeting").start(greet)
