"""Text safe to show: what a step wrote, made harmless for a terminal or a page.

A step's text (its error, traceback, log records, output) can hold control
characters: ESC starts terminal sequences (CSI ``ESC [``, OSC ``ESC ]`` that sets a
window title or writes the clipboard, OSC 52), a carriage return lets a line
overwrite the one it is printed on, and bidirectional overrides reorder what a
reader sees. `printable` shows each of them escaped, as Python would write it in a
string literal (``\\x1b``, ``\\r``, ``\\u202e``), so text that reaches a person looks
exactly as odd as it is and never acts on the terminal or the page.

The rule, on top of `ductline.codec.safe_text` (NUL as ``\\x00``, a lone surrogate
as ``\\udXXX``):

- C0 controls except tab and newline, DEL, and the C1 controls (``\\x80``-``\\x9f``:
  ``\\x9b`` is a one-byte CSI on some terminals) are escaped;
- so are the line and paragraph separators (U+2028, U+2029) and the bidirectional
  embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069);
- with ``newlines=False`` (one line of a table, a log line) tab and newline are
  escaped too.

Everything else, including every printable character of any script, is unchanged,
and text without such characters is returned as it is (the common case costs one
regular-expression search).
"""

from __future__ import annotations

import re

from ductline.codec import safe_text

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_IN_LINES = re.compile(f"[{_CONTROLS}]")
_IN_ONE_LINE = re.compile(f"[\t\n{_CONTROLS}]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, newlines: bool = True) -> str:
    """``text`` with every control character shown escaped (see the module's rule).

    Args:
        text: any text, including lone surrogates and NUL.
        newlines: keep newlines and tabs (a traceback, a log message); ``False``
            escapes them too, for text that must stay on one line.

    Returns:
        Text that is valid UTF-8, holds no NUL and no character a terminal or a
        browser would act on.
    """
    text = safe_text(text)
    pattern = _IN_LINES if newlines else _IN_ONE_LINE
    return pattern.sub(_escape, text) if pattern.search(text) else text


def printable_value(value: object, *, newlines: bool = True) -> object:
    """`printable` applied to every string of a JSON-like value (keys included);
    other values are returned as they are. Containers are copied."""
    if isinstance(value, str):
        return printable(value, newlines=newlines)
    if isinstance(value, dict):
        return {printable(str(k), newlines=False): printable_value(v, newlines=newlines) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_value(v, newlines=newlines) for v in value]
    return value
