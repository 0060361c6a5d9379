"""The environment the command line's consoles read their size from.

``COLUMNS`` and ``LINES`` are numbers a shell sets, read here in ASCII digits only
(`ductline.numerals.whole_number`). The console library reads them with
``str.isdigit``, which takes ``"²"`` and ``"١٢٠"`` and then fails in int() on the
first, so a stray value stopped every command with a traceback before it could
say anything. A value that is no positive number is left out, as the library
leaves out ``"abc"``: the console then sizes itself from the terminal (or the
command's default when piped).
"""

from __future__ import annotations

import os
from typing import Iterator, Mapping

from ductline import numerals

SIZES = ("COLUMNS", "LINES")


def size(name: str, env: Mapping[str, str] | None = None) -> int | None:
    """``COLUMNS`` or ``LINES`` as a positive whole number, or ``None`` when it is
    unset or anything else."""
    text = (os.environ if env is None else env).get(name)
    if text is None:
        return None
    try:
        value = numerals.whole_number(text)
    except ValueError:
        return None
    return value if value > 0 else None


class _Environ(Mapping[str, str]):
    """``os.environ`` as it is at each read (a console reads its size again when it
    prints), with ``COLUMNS`` and ``LINES`` as `size` reads them."""

    def __getitem__(self, name: str) -> str:
        if name in SIZES:
            value = size(name)
            if value is None:
                raise KeyError(name)
            return str(value)
        return os.environ[name]

    def __iter__(self) -> Iterator[str]:
        return (name for name in os.environ if name not in SIZES or size(name) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def environ() -> Mapping[str, str]:
    """What a console is given as its environment: ``os.environ`` without a
    ``COLUMNS`` or ``LINES`` that `size` cannot read."""
    return _Environ()
