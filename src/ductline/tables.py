"""The CLI's tables of runs (``ductline runs``), of one run's steps and attempts
(``ductline show``), of workers (``ductline workers``) and of schedules (``ductline
schedules``), drawn to fit the terminal.

Each table comes in two forms. The full form (whole run ids, ISO 8601 UTC times
with milliseconds, every column) is printed when it fits the console's width, as
it does in a wide terminal or when the output is piped (200 columns, unless
``COLUMNS`` says otherwise). Otherwise the compact form: short unique id prefixes
(`ductline.views.short_ids`), local times without the date when they are today's
(`ductline.views.compact_time`), durations instead of end times, no borders, and
text columns that wrap instead of being cut. In both forms a cell of stored text
(`_cell`: an error, a reason, a name) holds at most `ERROR_CHARS` characters, cut
with "…" beyond (the JSON outputs give it whole): one long error must not push a
table's other rows off the screen.

Every cell that holds text a step made (errors, skip reasons) is escaped
(`ductline.safetext`): nothing a step wrote acts on the terminal.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any, Callable

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from ductline import safetext, terminal, views
from ductline.frames import where_stored
from ductline.model.states import RunStatus

ERROR_CHARS = 120  # of an error in a table; `show --json` has it whole


def output_console() -> Console:
    """The console a command prints its tables to: the terminal's width, or
    ``COLUMNS``; piped without ``COLUMNS``, 200 columns (the full forms fit)."""
    sized = sys.stdout.isatty() or terminal.size("COLUMNS") is not None
    return Console(width=None if sized else 200, _environ=terminal.environ())


def fits(console: Console, table: Table) -> bool:
    """Whether ``table`` fits the console's width without shrinking a column (its
    widest form, measured as if there were no limit)."""
    unlimited = console.options.update_width(1_000_000)
    return Measurement.get(console, unlimited, table).maximum <= console.width


def _compact(*headers: str) -> Table:
    return Table(*headers, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)


def _cell(text: Any, limit: int = ERROR_CHARS) -> str:
    """Stored text as a table cell: escaped, on one line, at most ``limit`` characters."""
    shown = safetext.printable("" if text is None else str(text), newlines=False)
    return shown if len(shown) <= limit else shown[:limit - 1] + "…"


def _took(row: dict[str, Any]) -> int | None:
    """How long a run ran, from its start (its first attempt's) to its end; none for
    a run that never started (cancelled while pending: its time waiting is not a
    time it took), as the dashboard's runs list shows it, nor one that has not ended."""
    start = row.get("started_ms")
    if _finished_ms(row) is None or start is None:
        return None
    return max(0, int(row["finished_ms"]) - int(start))


def _finished_ms(row: dict[str, Any]) -> int | None:
    """When a run ended; none for a halted run, which has not (`ductline retry` revives it)."""
    return None if row["status"] == RunStatus.HALTED else row.get("finished_ms")


def runs_table(console: Console, rows: list[dict[str, Any]], short: Callable[[], dict[str, str]],
               reasons: dict[str, str] | None = None) -> Table:
    """The table of ``ductline runs``.

    Args:
        rows: the store's run rows (``list_runs``), newest first.
        short: gives the short prefix of each run id (called only for the compact form).
        reasons: why each run stopped, by run id (`ductline.views.run_reasons`).
    """
    reasons = reasons or {}

    def reason(r: dict[str, Any]) -> str:
        return _cell(reasons.get(r["id"]))

    full = Table("run", "pipeline", "status", "reason", "created", "finished")
    full.columns[0].no_wrap = True
    for r in rows:
        full.add_row(r["id"], r["pipeline"], r["status"], reason(r), views.iso(r["created_ms"]) or "",
                     views.iso(_finished_ms(r)) or "")
    if fits(console, full):
        return full
    prefixes = short()
    table = _compact("run", "pipeline", "status", "reason", "created", "took")
    for column in (0, 2, 4, 5):
        table.columns[column].no_wrap = True
    table.columns[1].overflow = table.columns[3].overflow = "fold"
    for r in rows:
        table.add_row(prefixes[r["id"]], r["pipeline"], r["status"], reason(r),
                      views.compact_time(r["created_ms"]), views.compact_duration(_took(r)))
    return table


def _where(step: dict[str, Any]) -> str:
    return str(step["step"]) + ("" if step["index"] is None else f"[{step['index']}]")


def _why(step: dict[str, Any]) -> str:
    """A step run's last error; for one that never ran, why it was skipped and the
    step run whose stop made it unreachable (its skip root); for one an operator
    marked succeeded, who did (its attempts' errors are history then)."""
    marked = step.get("marked")
    if marked:
        return _cell(f"marked succeeded by {marked['actor']}")
    last = step["attempts"][-1] if step["attempts"] else {}
    if last.get("error_type"):
        return _cell(f"{last['error_type']}: {last.get('error')}")
    reason = step["skip_reason"] or ""
    if step.get("skip_root"):
        reason = f"{reason} (root: {step['skip_root']})" if reason else f"root: {step['skip_root']}"
    return _cell(reason)


def _status(step: dict[str, Any]) -> str:
    return str(step["status"]) + (" (throttled)" if step["throttled"] else "")  # waits for a concurrency slot


def steps_table(console: Console, view: dict[str, Any]) -> Table:
    """The step runs of ``ductline show``: status, attempts, last error or skip."""
    full = Table("step", "index", "status", "not before", "attempts", "last result", "error")
    for s in view["steps"]:
        last = s["attempts"][-1] if s["attempts"] else {}
        full.add_row(s["step"], "" if s["index"] is None else str(s["index"]), _status(s), s["not_before"] or "",
                     str(len(s["attempts"])), last.get("result") or "", _why(s))
    if fits(console, full):
        return full
    waits = any(s["not_before"] for s in view["steps"])
    table = _compact("step", "status", *(["not before"] if waits else []), "tries", "error or skip")
    table.columns[0].overflow = table.columns[-1].overflow = "fold"
    table.columns[1].no_wrap = True
    for s in view["steps"]:
        when = [views.compact_time(_ms(s["not_before"]))] if waits else []
        table.add_row(_where(s), _status(s), *when, str(len(s["attempts"])), _why(s))
    return table


def attempts_table(console: Console, view: dict[str, Any]) -> Table:
    """Every attempt of ``ductline show`` with its start, end (or duration) and error."""
    full = Table("step", "index", "attempt", "result", "started", "finished", "duration", "error")
    table = _compact("step", "#", "result", "started", "took", "error")
    table.columns[0].overflow = table.columns[-1].overflow = "fold"
    for column in (1, 2, 3, 4):
        table.columns[column].no_wrap = True
    for s in view["steps"]:
        for a in s["attempts"]:
            # where a failed attempt's error was raised: the last frames of its traceback
            error = (_cell(f"{a['error_type']}: {a['error']}") + _cell(where_stored(a["traceback"]))
                     if a["error_type"] else "")
            full.add_row(s["step"], "" if s["index"] is None else str(s["index"]), str(a["attempt"]),
                         a["result"] or "running", a["started_at"] or "", a["finished_at"] or "",
                         views.duration_text(a["duration_ms"]), error)
            table.add_row(_where(s), str(a["attempt"]), a["result"] or "running",
                          views.compact_time(_ms(a["started_at"])),
                          "running" if a["duration_ms"] is None else views.compact_duration(a["duration_ms"]), error)
    return full if fits(console, full) else table


def _ms(text: str | None) -> int | None:
    """Epoch milliseconds of an `ductline.views.iso` time."""
    if text is None:
        return None
    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def children_table(console: Console, view: dict[str, Any]) -> Table:
    """The child runs of ``ductline show``: which step started each, and how it stands
    (`ductline runs --parent RUN` lists them with the runs' own columns)."""
    full = Table("child run", "pipeline", "started by", "#", "status", "created", "finished")
    table = _compact("child run", "pipeline", "by", "#", "status")
    for c in view["children"]:
        full.add_row(c["run_id"], _cell(c["pipeline"]), _cell(c["step"] or ""), str(c["index"]), c["status"],
                     c["created_at"] or "", c["finished_at"] or "")
        table.add_row(c["run_id"][:12], _cell(c["pipeline"]), _cell(c["step"] or ""), str(c["index"]), c["status"])
    return full if fits(console, full) else table


def workers_table(console: Console, rows: list[Any]) -> Table:
    """The table of ``ductline workers``.

    Args:
        rows: `ductline.observability.health.WorkerHealth` rows.
    """
    def health(w: Any) -> str:
        if w.health == "lost":
            return "[red]lost[/red]"
        # The problem may quote an app's error (a live worker's step children that fail
        # to start): escaped, on one line, never read as markup.
        problem = escape(_cell(w.problem))
        return w.health if w.healthy is None else "[green]ok[/green]" if w.healthy else f"[red]{problem}[/red]"

    full = Table("worker", "host", "pid", "queues", "status", "busy", "slots", "undead", "last heartbeat", "age (s)",
                 "health")
    for w in rows:
        full.add_row(w.id[:12], w.host, str(w.pid), _cell(", ".join(w.queues)), w.status, str(w.busy),
                     str(w.concurrency), f"[red]{w.undead}[/red]" if w.undead else "0", w.last_heartbeat,
                     f"{w.age_seconds:.1f}", health(w))
    if fits(console, full):
        return full
    # Narrow, the status joins the health (it adds something only while a live worker
    # is stopping), which leaves room for the queues.
    table = _compact("worker", "host", "pid", "queues", "busy", "undead", "heartbeat", "health")
    for column in (0, 2, 4, 5, 6):
        table.columns[column].no_wrap = True
    for column in (1, 3, 7):  # long host names, many queues: wrapped, never cut
        table.columns[column].overflow = "fold"
    for w in rows:
        state = health(w) if w.status in ("running", w.health) else f"{health(w)} ({w.status})"
        # one queue a line: a name is split only when it alone is wider than its column
        table.add_row(w.id[:8], w.host, str(w.pid), "\n".join(_cell(q) for q in w.queues), f"{w.busy}/{w.concurrency}",
                      f"[red]{w.undead}[/red]" if w.undead else "0", f"{w.age_seconds:.1f} s ago", state)
    return table


def schedules_table(console: Console, rows: list[dict[str, Any]]) -> Table:
    """The table of ``ductline schedules``.

    Args:
        rows: `ductline.schedule_command.schedule_view` dicts.
    """
    def state(v: dict[str, Any]) -> str:
        return {"enabled": "[green]enabled[/green]", "disabled": "[yellow]disabled[/yellow]"}.get(
            v["state"], f"[red]{v['state']}[/red]")

    full = Table("name", "pipeline", "cron (UTC)", "state", "next fire", "last fire", "last run")
    full.columns[6].no_wrap = True
    for v in rows:
        # a disabled or removed schedule fires nothing: its stored next fire is no promise
        next_fire = (v["next_fire"] or "") if v["state"] == "enabled" else "—"
        full.add_row(v["name"], v["pipeline"], v["cron"], state(v), next_fire, v["last_fire"] or "",
                     v["last_run_id"] or "")
    if fits(console, full):
        return full
    table = _compact("name", "pipeline", "cron (UTC)", "state", "next", "last", "last run")
    for column in (2, 4, 5, 6):
        table.columns[column].no_wrap = True
    table.columns[0].overflow = table.columns[1].overflow = table.columns[3].overflow = "fold"
    for v in rows:
        next_fire = views.compact_time(v["next_fire_ms"]) if v["state"] == "enabled" else "—"
        table.add_row(v["name"], v["pipeline"], v["cron"], state(v), next_fire,
                      views.compact_time(v["last_fire_ms"]), (v["last_run_id"] or "")[:8])
    return table
