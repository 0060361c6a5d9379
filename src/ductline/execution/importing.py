"""Whether ductline is importing an app now.

ductline imports the modules that define pipelines to find them and their steps:
the worker process, each of its children, and the commands given an app
(``ductline run``, ``dashboard --app``, ...). Code at a module's top level therefore
runs in every one of them. Starting a run there would start one per import (a
worker restarted in a loop would start one per restart); `ductline.execute` would
even wait for children of its own that import the same module again, until the
start-up timeout. Both are refused while an app is imported (`refuse`), with the fix
in the message.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

_importing: list[str] = []  # the app spec being imported now, if any


@contextmanager
def importing(spec: str) -> Iterator[None]:
    """Mark the import of the app ``spec`` (`ductline.apps.import_app`)."""
    _importing[:] = [spec]
    try:
        yield
    finally:
        _importing.clear()


def refuse(what: str) -> None:
    """Raise if an app is being imported now.

    Raises:
        RuntimeError: ``what`` (e.g. ``"ductline.execute()"``) was called at the top
            level of a module ductline imports as an app.
    """
    if _importing:
        raise RuntimeError(
            f"{what} was called while ductline imported {_importing[0]} to find its pipelines and steps: "
            "a worker, each of its children and the ductline commands import that module, so its top-level "
            "code runs in each of them; put the call under `if __name__ == \"__main__\":`")
