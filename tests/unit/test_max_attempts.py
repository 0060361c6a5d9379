"""``max_attempts`` is the name of the attempt budget; ``max_retry`` is its older
alias. Every transition takes either (not both); they mean the same number of
attempts, and a run makes exactly that many."""

from __future__ import annotations

import pytest

import ductline
import steps_for_tests as s
from ductline import Pipeline
from ductline.dsl.options import build_options
from steps_for_tests import unique_name


def every_transition(**options):
    """A pipeline using every transition, each given ``options``; its steps' options by name."""
    pipeline = (Pipeline(unique_name("attempts"))
                .start(s.a, **options)
                .chain(to=s.b, **options)
                .divide(to=[s.c, s.d], **options).combine(into=s.e, **options)
                .expand(to=s.f, **options).collapse(into=s.g, **options)
                .divert(to={"x": s.h, "otherwise": s.load_user}, **options).converge(into=s.collate, **options))
    return {name: node.options for name, node in pipeline.definition().nodes.items()}


@pytest.mark.parametrize("count", [1, 2, 5])
def test_every_transition_takes_max_attempts_as_max_retry(count):
    by_new, by_old = every_transition(max_attempts=count), every_transition(max_retry=count)
    assert set(by_new) == {"a", "b", "c", "d", "e", "f", "g", "h", "load_user", "collate"}
    assert {o.max_retry for o in by_new.values()} == {count}
    assert by_new == by_old


def test_the_default_is_three_attempts():
    assert build_options().max_retry == build_options(max_attempts=3).max_retry == 3


def test_both_at_once_is_a_type_error_naming_both():
    with pytest.raises(TypeError, match=r"give max_attempts or max_retry, not both \(max_retry is the older name"):
        Pipeline(unique_name()).start(s.a, max_attempts=2, max_retry=2)


@pytest.mark.parametrize(("value", "error", "message"), [
    (0, ValueError, r"max_attempts must be at least 1 \(one attempt, no retry\), got 0"),
    (-1, ValueError, r"max_attempts must be at least 1 \(one attempt, no retry\), got -1"),
    (-2, ValueError, r"max_attempts must be at least 1 \(one attempt, no retry\), got -2"),
    (2.0, TypeError, r"max_attempts must be an int, not float"),
    (True, TypeError, r"max_attempts must be an int, not bool"),
    ("3", TypeError, r"max_attempts must be an int, not str"),
    (10**7, ValueError, "max_attempts must be at most 1,000,000"),
])
def test_a_bad_max_attempts_is_refused_by_name(value, error, message):
    with pytest.raises(error, match=message):
        Pipeline(unique_name()).start(s.a, max_attempts=value)


def test_max_retry_keeps_its_old_range():
    assert build_options(max_retry=0).max_retry == 0  # one attempt, as before


def test_a_misspelt_option_suggests_max_attempts():
    with pytest.raises(TypeError, match=r"'max_attempt' \(did you mean 'max_attempts'\?\)"):
        Pipeline(unique_name()).start(s.a, max_attempt=2)


def always_fails(x):
    raise RuntimeError("no")


@pytest.mark.parametrize("count", [1, 2, 4])
def test_a_run_makes_exactly_max_attempts_attempts(count):
    pipeline = Pipeline(unique_name()).start(always_fails, max_attempts=count, retry_delay=0)
    result = ductline.execute(pipeline, 1)
    assert result.status == "halted" and result.metadata["halt_reason"] == "job_retries_exhausted"
    assert result.step("always_fails").attempts == count
