"""Numbers written as text in settings: plain ASCII decimal forms only.

Python's ``int`` and ``float`` read far more than an operator means to write:
other scripts' digits (``"١٢"`` is 12), underscores between digits (``"1_0"`` is
10) and Unicode spaces around them. A setting written that way is more likely a
mistake (a pasted value, a locale's digits) than a number, so the settings and
the ``DUCTLINE_*`` environment variables take only the forms below and the
caller refuses anything else, naming the variable and the value.
"""

from __future__ import annotations

import re

# ASCII digits only (re.ASCII: \d is [0-9]); an optional sign so a negative value
# is read and refused by the caller's range check with its own message.
_WHOLE = re.compile(r"[+-]?\d+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)
# Spaces an environment file or a shell may leave around a value; no other
# whitespace (Python's own strip() also takes Unicode spaces).
_AROUND = " \t\r\n"


def whole_number(text: str) -> int:
    """Read a whole number written in ASCII decimal digits (``"12"``, ``"-3"``).

    Args:
        text: the value as written; spaces and tabs around it are ignored.

    Returns:
        The number.

    Raises:
        ValueError: anything else -- a fraction, other scripts' digits, underscores,
            an empty text.
    """
    raw = text.strip(_AROUND)
    if not _WHOLE.fullmatch(raw):
        raise ValueError(f"not a whole number in ASCII digits: {text!r}")
    return int(raw)


def decimal_number(text: str) -> float:
    """Read a number written in ASCII decimal notation (``"1.5"``, ``".5"``, ``"2"``,
    ``"1e-3"``).

    Args:
        text: the value as written; spaces and tabs around it are ignored.

    Returns:
        The number as a float (``inf`` for a text too large for one: the caller's
        range check refuses it).

    Raises:
        ValueError: anything else -- ``nan``, ``inf``, other scripts' digits,
            underscores, an empty text.
    """
    raw = text.strip(_AROUND)
    if not _DECIMAL.fullmatch(raw):
        raise ValueError(f"not a decimal number in ASCII digits: {text!r}")
    return float(raw)
