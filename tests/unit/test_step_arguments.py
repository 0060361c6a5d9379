"""A step's arguments are bound to its signature before it is called
(`ductline.dsl.steps.invoke`): arguments that do not fit raise
`ductline.StepSignatureError`, which the rulebook never retries; a ``TypeError``
raised inside the step's body passes through unchanged (an ordinary, retried error)."""

from __future__ import annotations

import pickle
import sys

import pytest

import ductline
from ductline.dsl.steps import invoke


def pair_sum(a, b):
    return a + b


def calls_pair_sum_wrongly(x):
    return pair_sum(x)


def takes_any(*args):
    return len(args)


def needs_keyword(x, *, unit):
    return x


# The reason is `inspect.Signature.bind`'s own text, which Python 3.12 made name a
# keyword-only argument as such.
MISSING_KEYWORD_ONLY = (f"missing a required {'keyword-only ' if sys.version_info >= (3, 12) else ''}"
                        "argument: 'unit'")


class Plain(ductline.Step):
    def execute(self):
        return self.args


class Pair(ductline.Step):
    def __init__(self, a, b):
        super().__init__(a, b)

    def execute(self):
        return self.args


def test_arguments_that_fit_are_passed_on() -> None:
    assert invoke(pair_sum, (1, 2), "add") == 3
    assert invoke(takes_any, (1, 2, 3), "any") == 3
    assert invoke(Plain, (1, 2, 3), "plain") == (1, 2, 3)
    assert invoke(Pair, (1, 2), "pair") == (1, 2)


@pytest.mark.parametrize(("step", "args", "expected", "got", "reason"), [
    pytest.param(pair_sum, (1,), "pair_sum(a, b)", "1 argument (int)", "missing a required argument: 'b'",
                 id="too-few"),
    pytest.param(pair_sum, (1, "x", None), "pair_sum(a, b)", "3 arguments (int, str, NoneType)",
                 "too many positional arguments", id="too-many"),
    pytest.param(pair_sum, (), "pair_sum(a, b)", "0 arguments", "missing a required argument: 'a'",
                 id="none"),
    pytest.param(needs_keyword, (1,), "needs_keyword(x, *, unit)", "1 argument (int)",
                 MISSING_KEYWORD_ONLY, id="keyword-only"),
    pytest.param(Pair, ({"k": 1},), "Pair(a, b)", "1 argument (dict)", "missing a required argument: 'b'",
                 id="class-constructor"),
])
def test_arguments_that_do_not_fit_raise_step_signature_error(step, args, expected, got, reason) -> None:
    with pytest.raises(ductline.StepSignatureError) as caught:
        invoke(step, args, "the_step")
    error = caught.value
    assert isinstance(error, TypeError) and isinstance(error, ductline.DuctlineError)
    assert (error.step, error.expected, error.got, error.reason) == ("the_step", expected, got, reason)
    assert str(error).startswith(f"step 'the_step' cannot take its arguments: it expects {expected} "
                                 f"but got {got} ({reason})")


def test_the_step_name_defaults_to_the_callables_name() -> None:
    with pytest.raises(ductline.StepSignatureError, match="^step 'pair_sum' cannot take its arguments"):
        invoke(pair_sum, (1,))


def test_a_type_error_from_the_body_is_not_a_signature_error() -> None:
    with pytest.raises(TypeError) as caught:
        invoke(calls_pair_sum_wrongly, (1,), "wrong_call")
    assert type(caught.value) is TypeError


def test_a_callable_whose_signature_cannot_be_read_is_left_to_the_call() -> None:
    assert invoke(max, (3, 7), "largest") == 7
    with pytest.raises(TypeError, match="max expected at least 1 argument, got 0") as caught:
        invoke(max, (), "largest")
    assert not isinstance(caught.value, ductline.StepSignatureError)


def test_an_async_step_is_checked_before_its_coroutine_exists() -> None:
    async def async_pair(a, b):
        return a + b

    with pytest.raises(ductline.StepSignatureError, match=r"expects async_pair\(a, b\) but got 1 argument"):
        invoke(async_pair, (1,), "async_pair")


def test_it_is_recorded_under_its_public_name_and_pickles() -> None:
    error = ductline.StepSignatureError("s", "f(a, b)", "1 argument (int)", "missing")
    assert f"{type(error).__module__}.{type(error).__qualname__}" == "ductline.StepSignatureError"
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) and again.expected == "f(a, b)"


def _shapes():
    """Functions of many parameter shapes (positional-only, defaults, *args, keyword-only)."""
    def none():
        pass

    def one(a):
        pass

    def one_default(a, b=1):
        pass

    def only(a, /, b, c=2):
        pass

    def star(a, *rest):
        pass

    def star_kw(*rest, unit):
        pass

    def kw_default(a, *, unit=1):
        pass

    def kw_required(a, *, unit):
        pass

    def everything(a, /, b=1, *rest, unit=2, **extra):
        pass

    class Built(ductline.Step):
        def __init__(self, a, b=0):
            super().__init__(a, b)

        def execute(self):
            return None

    return [none, one, one_default, only, star, star_kw, kw_default, kw_required, everything, Built, Plain, Pair]


@pytest.mark.parametrize("step", _shapes(), ids=lambda f: f.__name__)
@pytest.mark.parametrize("count", range(5))
def test_arguments_are_refused_exactly_when_they_do_not_bind(step, count):
    import inspect

    from ductline.dsl.steps import check_arguments

    args = tuple(range(count))
    try:
        inspect.signature(step).bind(*args)
        binds = True
    except TypeError:
        binds = False
    if binds:
        check_arguments(step, args)
    else:
        with pytest.raises(ductline.StepSignatureError):
            check_arguments(step, args)
