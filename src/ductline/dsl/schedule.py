"""`schedule`: cron schedules that trigger runs, and their registry.

A schedule is declared at import time, next to its pipeline::

    nightly = Pipeline("nightly_report").start(build_report)
    ductline.schedule(nightly, cron="0 3 * * *", args=("eu",))

Workers that serve the pipeline write the definition to the database when they
start and fire its ticks (`ductline.runtime.scheduler`). Times are UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ductline import codec
from ductline.dsl.graph import is_unicode

if TYPE_CHECKING:
    from ductline.dsl.pipeline import PipelineBuilder as Pipeline

# Schedules register themselves by name when they are declared (like pipelines), so a
# worker that imported an app module knows every schedule of the pipelines it serves.
_SCHEDULES: dict[str, "Schedule"] = {}

MAX_NAME_LENGTH = 200
# The most missed ticks one schedule runs after downtime (``catch_up=``): a day of a
# quarter-hourly schedule. More would let one outage start an unbounded burst.
MAX_CATCH_UP = 100


@dataclass(frozen=True)
class Schedule:
    """A validated schedule: ``args`` is the JSON text of the argument list."""

    name: str
    pipeline: str
    cron: str
    args: str
    catch_up: int = 1   # the most missed ticks fired after downtime, latest ones


def _croniter() -> Any:
    """croniter, imported on first use: it and dateutil cost every process that
    imports ductline (each step child too) tens of milliseconds, and only code that
    declares or fires a schedule needs them."""
    from croniter import croniter

    return croniter


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, timezone.utc)


def _ms(moment: datetime) -> int:
    return int(round(moment.timestamp() * 1000))


def next_tick_ms(cron: str, after_ms: int) -> int:
    """The first tick of ``cron`` strictly after ``after_ms`` (epoch ms, UTC)."""
    return _ms(_croniter()(cron, _utc(after_ms)).get_next(datetime))


def latest_tick_ms(cron: str, at_ms: int) -> int:
    """The last tick of ``cron`` at or before ``at_ms`` (epoch ms, UTC)."""
    # croniter's get_prev is strictly before its start; start 1 ms later to include at_ms.
    return _ms(_croniter()(cron, _utc(at_ms + 1)).get_prev(datetime))


def count_ticks(cron: str, from_ms: int, before_ms: int, cap: int = 1000) -> int:
    """How many ticks fall in ``[from_ms, before_ms)``, counting at most ``cap``."""
    if from_ms >= before_ms:
        return 0
    it = _croniter()(cron, _utc(from_ms - 1))
    count = 0
    while count < cap and _ms(it.get_next(datetime)) < before_ms:
        count += 1
    return count


def ticks_between(cron: str, from_ms: int, to_ms: int, cap: int) -> list[int]:
    """The ticks of ``cron`` in ``[from_ms, to_ms]`` (epoch ms, UTC), oldest first; at
    most ``cap + 1`` of them, so a caller can tell a range holding more than ``cap``."""
    found: list[int] = []
    if from_ms > to_ms:
        return found
    it = _croniter()(cron, _utc(from_ms - 1))
    while len(found) <= cap:
        tick = _ms(it.get_next(datetime))
        if tick > to_ms:
            break
        found.append(tick)
    return found


def last_ticks(cron: str, from_ms: int, to_ms: int, count: int) -> list[int]:
    """The last ``count`` ticks of ``cron`` in ``[from_ms, to_ms]``, oldest first (read
    backwards from ``to_ms``: a long outage costs ``count`` steps, not one per tick)."""
    it = _croniter()(cron, _utc(to_ms + 1))
    found: list[int] = []
    while len(found) < count:
        tick = _ms(it.get_prev(datetime))
        if tick < from_ms:
            break
        found.append(tick)
    return found[::-1]


def check_catch_up(catch_up: Any) -> int:
    """Validate ``catch_up=``: an ``int`` from 1 to `MAX_CATCH_UP`.

    Raises:
        TypeError: not an ``int``.
        ValueError: outside 1 to `MAX_CATCH_UP` (the message names the limit).
    """
    if isinstance(catch_up, bool) or not isinstance(catch_up, int):
        raise TypeError(f"catch_up must be an int, not {type(catch_up).__name__} ({catch_up!r})")
    if not 1 <= catch_up <= MAX_CATCH_UP:
        raise ValueError(f"catch_up must be from 1 to {MAX_CATCH_UP} (the limit), got {catch_up}")
    return catch_up


def tick_iso(tick_ms: int) -> str:
    """A tick as ISO 8601 UTC, e.g. ``2030-01-31T03:00:00Z``."""
    return _utc(tick_ms).strftime("%Y-%m-%dT%H:%M:%SZ")


def tick_key(name: str, tick_ms: int) -> str:
    """The idempotency key of one tick: ``schedule:<name>:<tick as ISO 8601 UTC>``."""
    return f"schedule:{name}:{tick_iso(tick_ms)}"


def check_cron(cron: Any) -> str:
    """Validate a cron expression (UTC). Five fields (minute hour day month weekday),
    ``@hourly``-style aliases, or a sixth field for seconds, as croniter reads it:
    ``"* * * * * */10"`` is every 10 seconds.

    Raises:
        TypeError: not a ``str``.
        ValueError: not 5 or 6 fields (croniter would also take a seventh, the
            year), not a valid cron expression, or one that never fires.
    """
    if not isinstance(cron, str):
        raise TypeError(f"cron must be a str, not {type(cron).__name__} ({cron!r})")
    fields = len(cron.split())
    if not cron.strip().startswith("@") and fields not in (5, 6):
        raise ValueError(f"invalid cron expression {cron!r}: it has {fields} field{'s' if fields != 1 else ''}; "
                         "give 5 (minute hour day-of-month month day-of-week) or 6 (the same, then seconds)")
    croniter = _croniter()
    if not croniter.is_valid(cron):
        raise ValueError(f"invalid cron expression {cron!r}")
    try:
        croniter(cron, datetime.now(timezone.utc)).get_next(datetime)
    except Exception as exc:  # noqa: BLE001 - croniter's errors for dates that never come
        raise ValueError(f"cron expression {cron!r} never fires: {exc}") from None
    return cron


def schedule(pipeline: "Pipeline", cron: str, args: Any = (), name: str | None = None,
             catch_up: int = 1) -> Schedule:
    """Trigger a run of ``pipeline`` at every tick of ``cron`` (UTC).

    Declare it at import time in a module the workers import (``--app``): a worker
    writes the schedules of the pipelines it serves to the database when it starts,
    and any worker serving the pipeline fires its ticks, exactly one run per tick
    (idempotency key ``schedule:<name>:<tick as ISO 8601 UTC>``). Missed ticks
    (workers down, or every slot busy) are replayed up to ``catch_up``: the latest
    ``catch_up`` of them fire, oldest first, one run each, and the schedule moves on
    to the first tick after now. ``ductline schedules backfill`` starts the runs of
    any range of past ticks; a tick never has two runs.

    Args:
        pipeline: the `Pipeline` to trigger.
        cron: a cron expression in UTC: five fields, an alias such as
            ``"@daily"``, or six fields with seconds last (``"* * * * * */5"``).
        args: the arguments of the first step, a tuple or list; each must obey
            the JSON rule (``ductline.codec``).
        name: the schedule's unique name (at most 200 characters, no NUL or lone
            surrogate); defaults to the pipeline's name.
        catch_up: the most missed ticks to run after downtime, 1 (the latest only,
            the default) to `MAX_CATCH_UP` (100).

    Returns:
        The registered `Schedule`.

    Raises:
        TypeError: ``pipeline`` is not a `Pipeline`, ``cron`` or ``name`` is not a
            ``str``, ``args`` is not a tuple or list or does not round-trip
            through JSON.
        ValueError: an invalid cron expression (the message names it), an empty
            or too long name, one with NUL or a lone surrogate, a name already used by another schedule in this
            process, or ``catch_up`` outside 1 to 100.
    """
    from ductline.dsl.pipeline import PipelineBuilder as Pipeline

    if not isinstance(pipeline, Pipeline):
        raise TypeError(f"schedule() needs a ductline Pipeline, got {type(pipeline).__name__}")
    cron = check_cron(cron)
    catch_up = check_catch_up(catch_up)
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple or list of arguments, not {type(args).__name__}")
    encoded = codec.dumps(list(args), what="schedule arguments")
    if name is None:
        name = pipeline.name
    if not isinstance(name, str):
        raise TypeError(f"schedule name must be a str, not {type(name).__name__}")
    # A lone surrogate is stored as its escape: "s\ud800" would name the same row as
    # the text "s\\ud800" (`is_unicode`, the rule of every stored name and key).
    if not name.strip() or len(name) > MAX_NAME_LENGTH or "\x00" in name or not is_unicode(name):
        raise ValueError(f"schedule name must be 1 to {MAX_NAME_LENGTH} characters without NUL or lone "
                         f"surrogates, got {name[:40]!r}")
    if name in _SCHEDULES:
        raise ValueError(f"a schedule named {name!r} is already defined (pipeline "
                         f"{_SCHEDULES[name].pipeline!r}); give each schedule a unique name=")
    entry = Schedule(name=name, pipeline=pipeline.name, cron=cron, args=encoded, catch_up=catch_up)
    _SCHEDULES[name] = entry
    return entry


def registered_schedules(pipelines: Any = None) -> list[Schedule]:
    """Schedules declared in this process, by name; only those of ``pipelines`` if given."""
    wanted = None if pipelines is None else set(pipelines)
    return [s for _, s in sorted(_SCHEDULES.items()) if wanted is None or s.pipeline in wanted]
