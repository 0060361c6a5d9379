"""Whether this process is a ductline child importing its apps.

A child imports the modules that define pipelines to find their steps, so code at
a module's top level runs again in every child. Starting a run there would start
one per child; `ductline.execute` would even wait for children of its own that
import the same module again, until the start-up timeout. Both are refused while
a child imports its apps (`refuse`), with the fix in the message.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

_importing: list[str] = []  # the app spec a child is importing now, if any


@contextmanager
def importing(spec: str) -> Iterator[None]:
    """Mark the import of the app ``spec`` by a child (`ductline.execution.child`)."""
    _importing[:] = [spec]
    try:
        yield
    finally:
        _importing.clear()


def refuse(what: str) -> None:
    """Raise if a child is importing its apps now.

    Raises:
        RuntimeError: ``what`` (e.g. ``"ductline.execute()"``) was called at the top
            level of a module a ductline child imports.
    """
    if _importing:
        raise RuntimeError(
            f"{what} was called while a ductline child process imported {_importing[0]} to find its "
            "steps: children import that module, so its top-level code runs in each of them; put the call "
            "under `if __name__ == \"__main__\":`")
