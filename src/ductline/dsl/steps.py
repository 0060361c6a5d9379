"""What a step is, and how it is named and found again by `module:qualname`."""

from __future__ import annotations

import functools
import inspect
import math
import sys
from typing import Any

from ductline.errors import DefinitionError, StepSignatureError


class Step:
    """Base class for class-based steps.

    A subclass implements ``execute(self)`` (plain or ``async``). The instance is
    built with the arguments a function step would receive: the trigger's arguments
    for the first step, one input for every other step. They are kept as
    ``self.args`` (a tuple) and, for a single argument, ``self.input``.

    Example::

        class LoadUser(ductline.Step):
            def execute(self):
                return fetch(self.input)
    """

    def __init__(self, *args: Any) -> None:
        self.args = args
        self.input = args[0] if len(args) == 1 else None

    def execute(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError(f"{type(self).__name__}.execute() is not implemented")


def step_kind(obj: object) -> str:
    """Return ``"class"``, ``"async"`` or ``"function"``; raise for anything else."""
    if inspect.isclass(obj):
        if issubclass(obj, Step):
            return "class"
        raise DefinitionError(f"{obj!r} is a class but not a ductline.Step subclass")
    if inspect.iscoroutinefunction(obj):
        return "async"
    if inspect.isfunction(obj):
        return "function"
    raise DefinitionError(
        f"a step must be a module-level function, async function or ductline.Step subclass, got {obj!r}"
    )


def reference(obj: Any) -> str:
    """The durable name of a step: ``module:qualname``.

    Raises:
        DefinitionError: if the object cannot be found again by that name (a lambda,
            a nested function, an object not bound to its name in its module).
    """
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname:
        raise DefinitionError(f"{obj!r} has no module and qualified name")
    if "<lambda>" in qualname or "<locals>" in qualname:
        raise DefinitionError(
            f"step {qualname!r} is not importable by name: define it at module level in {module}"
        )
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if found is not obj:
        raise DefinitionError(
            f"step {module}:{qualname} is not importable by name "
            "(it is not bound to that name in its module)"
        )
    return f"{module}:{qualname}"


def invoke(obj: Any, args: tuple[Any, ...], step: str | None = None) -> Any:
    """Call a step with its arguments; returns a value or an awaitable.

    Args:
        obj: the step: a function, an async function or a `Step` subclass.
        args: its positional arguments.
        step: its name in the pipeline, for the error (default: its ``__name__``).

    Raises:
        StepSignatureError: ``args`` do not bind to the step's signature (checked
            before the call, so a ``TypeError`` from the step's body stays its own).
        Whatever the step raises.
    """
    check_arguments(obj, args, step)
    if inspect.isclass(obj):
        instance: Any = obj(*args)
        return instance.execute()
    return obj(*args)


def check_arguments(obj: Any, args: tuple[Any, ...], step: str | None = None) -> None:
    """Raise `StepSignatureError` if ``obj(*args)`` would fail to bind its arguments.

    A class step is bound through its constructor (`Step`'s takes any arguments).
    A callable whose signature cannot be read is left to the call itself.
    """
    try:
        low, high = _arity(obj)
    except TypeError:  # unhashable: no cache
        low, high = _count_positional(_read_signature(obj))
    if low <= len(args) <= high:
        return  # binds: the common case, without building a binding
    signature = _signature(obj)
    if signature is None:
        return
    try:
        signature.bind(*args)
    except TypeError as exc:
        name = getattr(obj, "__name__", repr(obj))
        count = f"{len(args)} argument{'' if len(args) == 1 else 's'}"
        kinds = ", ".join(type(a).__name__ for a in args)
        raise StepSignatureError(step or name, f"{name}{signature}", f"{count} ({kinds})" if args else count,
                                 str(exc)) from None


def _signature(obj: Any) -> inspect.Signature | None:
    """``inspect.signature(obj)``, or ``None`` if it cannot be read; read once per step
    (a worker's child checks every attempt's arguments), every time if unhashable."""
    try:
        return _cached_signature(obj)
    except TypeError:  # unhashable
        return _read_signature(obj)


def _read_signature(obj: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


_cached_signature = functools.lru_cache(maxsize=None)(_read_signature)


def _count_positional(signature: inspect.Signature | None) -> tuple[float, float]:
    """How many positional arguments bind to ``signature``, at least and at most
    (any number if it cannot be read; none if a keyword-only one is required, so
    that `Signature.bind` raises with its own message)."""
    if signature is None:
        return 0, math.inf
    low = 0
    high: float = 0
    for param in signature.parameters.values():
        if param.kind is param.VAR_POSITIONAL:
            high = math.inf
        elif param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            high += 1
            low += param.default is param.empty
        elif param.kind is param.KEYWORD_ONLY and param.default is param.empty:
            return math.inf, -1
    return low, high


@functools.lru_cache(maxsize=None)
def _arity(obj: Any) -> tuple[float, float]:
    return _count_positional(_cached_signature(obj))


MAX_NAME_LENGTH = 200


def check_name(name: object, what: str) -> str:
    """Validate a pipeline's or a step's name: a ``str`` of 1 to `MAX_NAME_LENGTH`
    printable characters (names are stored, logged, shown on pages and used as metric
    labels, so control characters, NUL and lone surrogates are refused).

    Raises:
        TypeError: not a ``str``.
        DefinitionError: empty, too long, or not printable.
    """
    if type(name) is not str:
        raise TypeError(f"{what} must be a str, got {type(name).__name__} ({name!r:.80})")
    if not name.strip():
        raise DefinitionError(f"{what} must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise DefinitionError(f"{what} must be at most {MAX_NAME_LENGTH} characters, got {len(name)}")
    if not name.isprintable():
        raise DefinitionError(f"{what} must be printable text (no control characters), got {name!r:.80}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise DefinitionError(f"{what} is not valid text (a lone surrogate): {name!r:.80}") from None
    return name
