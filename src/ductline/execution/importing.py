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

import threading
from contextlib import contextmanager
from typing import Iterator

# The app spec being imported now by this thread, if any. Per thread: a module's
# top level runs in the thread that imports it, and a program's other threads (a web
# application that mounts the dashboard for an app, say) go on starting runs of
# their own meanwhile.
_importing = threading.local()


@contextmanager
def importing(spec: str) -> Iterator[None]:
    """Mark the import of the app ``spec`` in this thread (`ductline.apps.import_app`);
    an import inside it restores the outer mark when it ends."""
    outer = getattr(_importing, "spec", None)
    _importing.spec = spec
    try:
        yield
    finally:
        _importing.spec = outer


def refuse(what: str) -> None:
    """Raise if this thread is importing an app now.

    Raises:
        RuntimeError: ``what`` (e.g. ``"ductline.execute()"``) was called at the top
            level of a module ductline imports as an app.
    """
    spec = getattr(_importing, "spec", None)
    if spec is not None:
        raise RuntimeError(
            f"{what} was called while ductline imported {spec} to find its pipelines and steps: "
            "a worker, each of its children and the ductline commands import that module, so its top-level "
            "code runs in each of them; put the call under `if __name__ == \"__main__\":`")
