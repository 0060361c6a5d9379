"""Where an error was raised, as ductline's messages name it: the last frames of its
traceback, innermost first, as ``" (at helper.py:3 in divide, called from app.py:2)"``.
One rule for an exception at hand (an app's import error) and for a traceback stored
as text (a step's failed attempt)."""

from __future__ import annotations

import importlib
import os
import re
import traceback

# How many frames an error names (innermost first): where it failed and what called
# that, without the whole traceback (`ductline show --json` and, for an import, the
# CLI's DEBUG log have all of it).
WHERE_FRAMES = 3
_IMPORTLIB = os.path.dirname(importlib.__file__)
# ductline's own package: a definition error raised in its checks names the user's
# line that called them, not the check; a step's traceback starts in ductline's child.
_DUCTLINE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def where(exc: BaseException) -> str:
    """``" (at helper.py:3 in divide, called from app.py:2)"``: the last frames of an
    exception's traceback, innermost first, leaving out the import machinery and the
    ductline package itself, so that an error raised by ductline's checks (a
    `DefinitionError` for a lambda step, a ``ValueError`` for ``timeout=-1``) names
    the user's line that called them (a syntax error names its file and line in its
    message). Paths under the working directory are relative. Empty when no frame is
    left. The one place that decides which frames an error names (`where_stored`
    applies it to a stored traceback)."""
    return _places([(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)])


# A frame line of a traceback as Python formats it: '  File "app.py", line 4, in helper'.
_FRAME_LINE = re.compile(r'^  File "(?P<file>.+)", line (?P<line>\d+), in (?P<name>.+)$')
_TRACEBACK_HEAD = "Traceback (most recent call last):"
# What Python writes between the tracebacks of a chain (traceback.format_exception).
_CHAINED = ("\n\nThe above exception was the direct cause of the following exception:\n\n",
            "\n\nDuring handling of the above exception, another exception occurred:\n\n")


def where_stored(text: str | None) -> str:
    """`where` for a traceback stored as text (an attempt's ``traceback``, as the
    child formats the step's exception): the same frames of the exception that ended
    the attempt (the last traceback of a chain), e.g. ``" (at bug.py:4 in helper,
    called from bug.py:7 in compute)"``. Empty for ``None`` or text with no frame.
    A traceback quoted in an exception's message (a remote job's, a subprocess's)
    is not taken for the step's: only a head that begins the text or follows a
    chain's separator starts one, and its frames end at the exception's line."""
    if not text or _TRACEBACK_HEAD not in text:
        return ""
    starts = [0] if text.startswith(_TRACEBACK_HEAD) else []
    for separator in _CHAINED:
        at = text.find(separator)
        while at >= 0:
            if text.startswith(_TRACEBACK_HEAD, at + len(separator)):
                starts.append(at + len(separator))
            at = text.find(separator, at + 1)
    last = text[max(starts):] if starts else text[text.index(_TRACEBACK_HEAD):]
    frames = []
    for line in last.splitlines()[1:]:
        match = _FRAME_LINE.match(line)
        if match:
            frames.append((match["file"], int(match["line"]), match["name"]))
        elif not line.startswith("  "):  # the exception's line (column 0): its message holds no frame
            break
    return _places(frames)


def _places(frames: list[tuple[str, int | None, str]] | list[tuple[str, int, str]]) -> str:
    """The rule of `where`: ``frames`` (file, line, function), outermost first."""
    kept = [f for f in frames if not f[0].startswith("<frozen") and not _in_ductline(f[0])
            and os.path.dirname(f[0]) != _IMPORTLIB]
    places = []
    for filename, lineno, name in reversed(kept[-WHERE_FRAMES:]):
        inside = "" if name == "<module>" else f" in {name}"
        places.append(f"{path(filename)}:{lineno}{inside}")
    if not places:
        return ""
    return f" (at {places[0]}" + "".join(f", called from {p}" for p in places[1:]) + ")"


def _in_ductline(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_DUCTLINE)


def path(filename: str) -> str:
    """A file's path as an error names it: relative under the working directory."""
    relative = os.path.relpath(filename) if os.path.isabs(filename) else filename
    return filename if relative.startswith("..") else relative
