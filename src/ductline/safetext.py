"""Text a step made, shown safely: one rule for terminals and logs.

A step's messages, errors and printed lines are stored as they were written. Shown
raw, an ESC (CSI and OSC sequences), a carriage return or another control
character lets that text set a terminal's title, write its clipboard (OSC 52) or
erase and forge the lines around it; a lone surrogate cannot even be encoded as
UTF-8. `escape` shows every such character as a Python-style escape instead
(``\\x1b``, ``\\r``, ``\\x9b``, ``\\u202e``, ``\\udcff``), so the text stays readable
and nothing in it acts on the reader's terminal.

Escaped: the C0 controls and DEL (U+0000-U+001F, U+007F) except tab and, when
asked, newline; the C1 controls (U+0080-U+009F, among them the one-character CSI
and OSC); the bidirectional embeddings, overrides and isolates (U+202A-U+202E,
U+2066-U+2069), which reorder what is displayed; and lone surrogates. Pure: no I/O.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_OR_NEWLINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\r": "\\r", "\n": "\\n"}


def _replacement(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def escape(text: str, *, newlines: bool = True) -> str:
    """``text`` with every unsafe character shown as an escape (see the module).

    Args:
        text: any text (lone surrogates included).
        newlines: keep newlines (``True``) or escape them as ``\\n`` too.

    Returns:
        Text that is valid UTF-8 and contains no control character but tab and,
        with ``newlines``, newline.
    """
    pattern = _UNSAFE if newlines else _UNSAFE_OR_NEWLINE
    return text if pattern.search(text) is None else pattern.sub(_replacement, text)


def lines(text: str, indent: str = "    ") -> str:
    """`escape` for a line-oriented output (a log line, a terminal): the lines after
    the first are indented, so that no text can pass for a line of its own."""
    return escape(text).replace("\n", "\n" + indent)

