"""Per-step options accepted by every transition, validated at definition time."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, Sequence, TypedDict

if TYPE_CHECKING:
    from ductline.dsl.timeouts import ScaledTimeout

from ductline.dsl.backoff import Backoff
from ductline.durations import MAX_SECONDS, optional_seconds, to_seconds
from ductline.loglevels import check_level

DEFAULT_MAX_RETRY = 3
DEFAULT_MAX_CRASH = 10
DEFAULT_MAX_FANOUT = 100_000
# Upper bounds of integer options: far beyond any real use, and inside every
# database's integer columns (so a typo cannot overflow a row at run time).
MAX_COUNT = 1_000_000          # max_attempts, max_crash
MAX_CONCURRENCY = 1_000_000
MAX_FANOUT = 10_000_000
ISOLATIONS = ("process", "thread", "fresh")
# Priorities are small integers: a claim probes each distinct priority of the ready
# jobs once, so the range bounds what a claim can cost.
MIN_PRIORITY, MAX_PRIORITY = -100, 100
# Attempts per second; below one a week, start slots of a long queue would leave the
# range of a millisecond timestamp.
MIN_RATE, MAX_RATE = 1 / (7 * 86400), 10_000
# Queue names: what `ductline worker --queue` takes on a command line and metrics
# carry as a label, so plain and short.
DEFAULT_QUEUE = "default"
QUEUE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")


@dataclass(frozen=True, slots=True)
class StepOptions:
    """Options of one step, in integer seconds.

    Attributes:
        timeout: seconds an attempt may run before it is killed, a `ScaledTimeout`,
            or ``None`` for no limit.
        delay: seconds the step waits after its predecessor committed (0 = none).
        max_retry: the attempt budget, shared by errored and timed-out attempts:
            the most attempts a job makes before it fails (0 and 1 both mean one).
            Given as ``max_attempts=`` (or its older alias ``max_retry=``); stored
            under this name.
        retry_delay: seconds between a failed attempt and the next; ``None`` takes
            the configured default (``DUCTLINE_RETRY_DELAY``, 10 s). With a
            `Backoff` policy, its base.
        backoff: the `Backoff` policy given as ``retry_delay=``, else ``None``.
        retry_on: qualified names of exception types that are always retried,
            whatever is left of ``max_attempts`` (they still count as failures).
        no_retry_on: qualified names of exception types never retried: the step
            fails at once and the run halts with ``non_retryable_error``.
        max_crash: budget for crashed attempts (worker died, lease expired).
        isolation: ``"process"`` (a killable child, reused between attempts after
            its process state is restored; the default), ``"fresh"`` (a child that
            runs this one attempt and is then retired) or ``"thread"``.
        memory_limit: bytes of address space an attempt's child may use
            (``RLIMIT_AS``, the interpreter included; 1 to 2**63 - 1), or ``None``.
        cpu_limit: CPU seconds an attempt may use (``RLIMIT_CPU``, rounded up to a
            whole second; more than 0, at most 100 years), or ``None``.
        priority: added to the run's priority to give the job's; claims take higher
            priorities first (-100 to 100, default 0).
        concurrency: at most this many attempts of the step run at once across all
            workers and hosts (per value of ``concurrency_key`` when given), or ``None``.
        concurrency_key: name of a field of the step's first argument (a dict) whose
            value partitions the step's limits (e.g. one attempt per customer).
        rate: at most this many attempts of the step start per second (per key),
            spaced at least ``1/rate`` s apart, or ``None``.
        log_level: the lowest level of the step's own log records kept
            (``"DEBUG"`` .. ``"CRITICAL"``), or ``None`` for the worker's
            ``step_log_level`` (default ``INFO``).
        queue: the queue its jobs wait in (only workers serving it claim them,
            ``ductline worker --queue``), or ``None`` for the pipeline's queue.
    """

    timeout: "int | ScaledTimeout | None" = None
    delay: int = 0
    max_retry: int = DEFAULT_MAX_RETRY
    retry_delay: int | None = None
    max_crash: int = DEFAULT_MAX_CRASH
    isolation: str = "process"
    backoff: Backoff | None = None
    retry_on: tuple[str, ...] = ()
    no_retry_on: tuple[str, ...] = ()
    priority: int = 0
    concurrency: int | None = None
    concurrency_key: str | None = None
    rate: float | None = None
    log_level: str | None = None
    memory_limit: int | None = None
    cpu_limit: float | None = None
    queue: str | None = None

    @property
    def limited(self) -> bool:
        """Whether attempts of this step are subject to a concurrency or rate limit."""
        return self.concurrency is not None or self.rate is not None


class StepOptionsArgs(TypedDict, total=False):
    """The keyword options every transition accepts (``chain(to=f, timeout=30)``),
    typed so that a type checker flags a misspelled or mistyped option; at run time
    an unknown one raises `TypeError` naming it and the valid ones."""

    timeout: "int | timedelta | ScaledTimeout | None"
    delay: int | timedelta
    max_attempts: int
    max_retry: int  # the older name of max_attempts
    retry_delay: "int | timedelta | Backoff"
    max_crash: int
    isolation: Literal["process", "thread", "fresh"]
    retry_on: "type[BaseException] | str | Sequence[type[BaseException] | str]"
    no_retry_on: "type[BaseException] | str | Sequence[type[BaseException] | str]"
    priority: int
    concurrency: int
    concurrency_key: str
    rate: float
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL",
                       "debug", "info", "warning", "error", "critical"]
    memory_limit: int
    cpu_limit: float
    queue: str


OPTION_NAMES = tuple(StepOptionsArgs.__annotations__)


def unknown_keywords(where: str, unknown: Sequence[str], valid: Sequence[str], what: str = "options") -> TypeError:
    """The `TypeError` for keywords a DSL call does not take (``Pipeline("x", timout=5)``).

    The message names each unknown keyword with the closest valid one, if any is
    close (``difflib.get_close_matches``), and lists the valid ones.

    Args:
        where: the call, for the message (e.g. ``"chain()"``).
        unknown: the keywords it got that it does not take.
        valid: the keywords it takes, in the order to list them.
        what: how the message calls the valid keywords (e.g. ``"step options"``).

    Returns:
        The error, for the caller to raise.
    """
    names = []
    for keyword in sorted(unknown):
        close = difflib.get_close_matches(keyword, valid, n=1)
        names.append(f"{keyword!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    plural = "s" if len(names) > 1 else ""
    return TypeError(f"{where} got unknown option{plural} {', '.join(names)}; the {what} are {', '.join(valid)}")


def check_option_names(options: dict[str, Any], where: str, keywords: Sequence[str] = ("name",)) -> None:
    """Raise `TypeError` for a keyword that is not a step option (e.g. ``timout``),
    naming it, the closest valid one and the valid ones (`unknown_keywords`).

    Args:
        options: the keyword options the call got besides its own keywords.
        where: the call, for the message (e.g. ``"chain()"``).
        keywords: the call's own keywords, listed with the step options (a
            misspelt ``nmae=`` lands in ``options`` too).
    """
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise unknown_keywords(where, unknown, (*keywords, *OPTION_NAMES), "step options")


def check_priority(value: Any, field: str = "priority") -> int:
    """Validate a priority: an ``int`` from `MIN_PRIORITY` to `MAX_PRIORITY`.

    Raises:
        TypeError: not an ``int`` (``bool`` included).
        ValueError: outside the range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be an int, not {type(value).__name__} ({value!r})")
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise ValueError(f"{field} must be from {MIN_PRIORITY} to {MAX_PRIORITY}, got {value}")
    return value


def check_queue(value: Any, field: str = "queue") -> str:
    """Validate a queue name: a ``str`` of 1 to 100 letters, digits, ``_``, ``.``,
    ``:`` or ``-``, starting with a letter or digit.

    Raises:
        TypeError: not a ``str``.
        ValueError: empty, too long, or another character.
    """
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, not {type(value).__name__} ({value!r})")
    if QUEUE_PATTERN.fullmatch(value) is None:
        raise ValueError(f"{field} must be 1 to 100 letters, digits, '_', '.', ':' or '-' starting with a "
                         f"letter or digit, got {value!r}")
    return value


def _limits(concurrency: Any, concurrency_key: Any, rate: Any) -> tuple[int | None, str | None, float | None]:
    if concurrency is not None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int):
            raise TypeError(f"concurrency must be an int, not {type(concurrency).__name__} ({concurrency!r})")
        if not 1 <= concurrency <= MAX_CONCURRENCY:
            raise ValueError(f"concurrency must be from 1 to {MAX_CONCURRENCY:,}, got {concurrency}")
    if rate is not None:
        if isinstance(rate, bool) or not isinstance(rate, (int, float)):
            raise TypeError(f"rate must be a number of attempts per second, not {type(rate).__name__} ({rate!r})")
        if not MIN_RATE <= rate <= MAX_RATE or rate != rate:
            raise ValueError(f"rate must be from {MIN_RATE:g} (one a week) to {MAX_RATE} attempts per second, "
                             f"got {rate}")
        rate = float(rate)
    if concurrency_key is not None:
        if not isinstance(concurrency_key, str) or not concurrency_key:
            raise TypeError(f"concurrency_key must be the name of a field of the step's input, got {concurrency_key!r}")
        if concurrency is None and rate is None:
            raise ValueError("concurrency_key needs concurrency= or rate= to limit")
    return concurrency, concurrency_key, rate


# setrlimit takes a C long: a larger limit would fail every attempt, not the definition.
MAX_MEMORY_LIMIT = 2**63 - 1


def _resource_limits(memory_limit: Any, cpu_limit: Any, isolation: str) -> tuple[int | None, float | None]:
    if memory_limit is not None:
        if isinstance(memory_limit, bool) or type(memory_limit) is not int:
            raise TypeError(f"memory_limit must be an int number of bytes, not {type(memory_limit).__name__} "
                            f"({memory_limit!r})")
        if memory_limit <= 0:
            raise ValueError(f"memory_limit must be more than 0 bytes, got {memory_limit}")
        if memory_limit > MAX_MEMORY_LIMIT:
            raise ValueError(f"memory_limit must be at most {MAX_MEMORY_LIMIT} bytes (what setrlimit takes), "
                             f"got {memory_limit}")
    if cpu_limit is not None:
        if isinstance(cpu_limit, bool) or not isinstance(cpu_limit, (int, float)):
            raise TypeError(f"cpu_limit must be a number of CPU seconds, not {type(cpu_limit).__name__} "
                            f"({cpu_limit!r})")
        if not cpu_limit > 0 or cpu_limit == float("inf"):
            raise ValueError(f"cpu_limit must be a finite number of CPU seconds more than 0, got {cpu_limit}")
        if cpu_limit > MAX_SECONDS:
            raise ValueError(f"cpu_limit must be at most {MAX_SECONDS} CPU seconds (100 years), got {cpu_limit}")
        cpu_limit = float(cpu_limit)
    if isolation == "thread" and (memory_limit is not None or cpu_limit is not None):
        raise ValueError("memory_limit and cpu_limit need a child process: they cannot apply to "
                         "isolation='thread'")
    return memory_limit, cpu_limit


def _count(value: Any, field: str, maximum: int = MAX_COUNT, minimum: int = 0, meaning: str = "") -> int:
    """``value`` checked as a count in ``[minimum, maximum]``; ``meaning`` follows the
    lower bound in the error (one message for every value below it)."""
    if isinstance(value, bool) or type(value) is not int:  # an int subclass would be stored as an int
        raise TypeError(f"{field} must be an int, not {type(value).__name__} ({value!r})")
    if value < minimum:
        bound = f"must be at least {minimum}{meaning}" if minimum else "must not be negative"
        raise ValueError(f"{field} {bound}, got {value}")
    if value > maximum:
        raise ValueError(f"{field} must be at most {maximum:,}, got {value:,}")
    return value


def _attempts(max_attempts: Any, max_retry: Any) -> int:
    """The attempt budget from ``max_attempts=`` or its alias ``max_retry=`` (the
    name ``max_retry`` read as "retries", though it always counted attempts)."""
    if max_attempts is not None and max_retry is not None:
        raise TypeError(f"give max_attempts or max_retry, not both (max_retry is the older name of "
                        f"max_attempts), got max_attempts={max_attempts!r} and max_retry={max_retry!r}")
    if max_attempts is not None:
        return _count(max_attempts, "max_attempts", minimum=1, meaning=" (one attempt, no retry)")
    return DEFAULT_MAX_RETRY if max_retry is None else _count(max_retry, "max_retry")


def error_type_name(kind: type) -> str:
    """The name a failed attempt records for an exception type: ``qualname`` for
    builtins, else ``module.qualname`` (`ductline.execution.child.describe`)."""
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _error_types(value: Any, field: str) -> tuple[str, ...]:
    """Exception types or their qualified names, as the names attempts record.

    A name matches the recorded type exactly: subclasses are not included (the
    child records the raised type only), so list each type you mean.
    """
    if value is None:
        return ()
    items = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
    names = []
    for item in items:
        if isinstance(item, type) and issubclass(item, BaseException):
            names.append(error_type_name(item))
        elif isinstance(item, str) and item:
            names.append(item)
        else:
            raise TypeError(f"{field} takes exception types or their qualified names, got {item!r}")
    return tuple(sorted(set(names)))


def build_options(
    *,
    timeout: Any = None,
    delay: Any = None,
    max_attempts: Any = None,
    max_retry: Any = None,
    retry_delay: Any = None,
    max_crash: Any = None,
    isolation: Any = None,
    retry_on: Any = None,
    no_retry_on: Any = None,
    priority: Any = None,
    concurrency: Any = None,
    concurrency_key: Any = None,
    rate: Any = None,
    log_level: Any = None,
    memory_limit: Any = None,
    cpu_limit: Any = None,
    queue: Any = None,
) -> StepOptions:
    """Validate the keyword options of a transition (the duration rule of `ductline.durations`).

    ``max_attempts`` is the attempt budget (at least 1); ``max_retry`` is its older
    name, kept as an alias with its old range (0 means one attempt, as 1 does).

    Raises:
        TypeError / ValueError: as the duration rule says; both ``max_attempts``
            and ``max_retry`` given (`TypeError`); a ``max_attempts`` below 1;
            ``retry_on`` and
            ``no_retry_on`` that are not exception types or names, or that share
            a type; a ``priority`` outside -100..100; a ``concurrency`` below 1; a
            ``rate`` that is not more than 0 and at most 10000 per second; a
            ``concurrency_key`` that is not a field name or has nothing to limit;
            a ``log_level`` that names no level (`ductline.loglevels.check_level`);
            a ``memory_limit`` that is not an ``int`` more than 0, a ``cpu_limit``
            that is not a number more than 0, either with ``isolation="thread"``;
            a ``queue`` that is not a queue name (`check_queue`).
    """
    iso = "process" if isolation is None else isolation
    if iso not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
    from ductline.dsl.timeouts import ScaledTimeout

    always = _error_types(retry_on, "retry_on")
    never = _error_types(no_retry_on, "no_retry_on")
    if set(always) & set(never):
        raise ValueError(f"retry_on and no_retry_on both name {sorted(set(always) & set(never))}")
    backoff = retry_delay if isinstance(retry_delay, Backoff) else None
    limit, limit_key, limit_rate = _limits(concurrency, concurrency_key, rate)
    memory, cpu = _resource_limits(memory_limit, cpu_limit, iso)

    return StepOptions(
        timeout=timeout if isinstance(timeout, ScaledTimeout)
        else optional_seconds(timeout, field="timeout", allow_zero=False),
        delay=0 if delay is None else to_seconds(delay, field="delay"),
        max_retry=_attempts(max_attempts, max_retry),
        retry_delay=backoff.base if backoff is not None else optional_seconds(retry_delay, field="retry_delay"),
        max_crash=DEFAULT_MAX_CRASH if max_crash is None else _count(max_crash, "max_crash"),
        isolation=iso,
        backoff=backoff,
        retry_on=always,
        no_retry_on=never,
        priority=0 if priority is None else check_priority(priority),
        concurrency=limit,
        concurrency_key=limit_key,
        rate=limit_rate,
        log_level=None if log_level is None else check_level(log_level),
        memory_limit=memory,
        cpu_limit=cpu,
        queue=None if queue is None else check_queue(queue),
    )
