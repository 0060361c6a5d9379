"""`RunHandle`: what `trigger` returns."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ductline import codec
from ductline.errors import RunNotFound

if TYPE_CHECKING:
    from ductline.store import Store

# A run stops moving on its own in these states (halted waits for an operator).
# A paused run is not settled: other branches may still run, and a resume or the
# pause's timeout moves it on.
SETTLED = ("completed", "halted", "failed", "cancelled")


class _NoInput:
    def __repr__(self) -> str:
        return "NO_INPUT"


NO_INPUT: Any = _NoInput()
"""`RunHandle.resume` without ``input``: the step keeps the input it was paused with."""


class RunHandle:
    """A triggered run.

    Attributes:
        id: the run id (32 hex characters).
        created: ``False`` when ``trigger(..., key=...)`` found an active run holding
            the key and returned it instead of starting a new one.
    """

    def __init__(self, run_id: str, store: "Store", *, created: bool = True) -> None:
        self.id = run_id
        self.created = created
        self._store = store

    def _row(self) -> dict[str, Any]:
        row = self._store.get_run(self.id)
        if row is None:
            raise RunNotFound(f"run {self.id} not found")
        return row

    def status(self) -> str:
        """One of ``pending``, ``running``, ``paused``, ``completed``, ``halted``, ``failed``, ``cancelled``."""
        return str(self._row()["status"])

    def output(self) -> Any:
        """The last step's output once the run completed, else ``None``. An output
        stored out of line (above ``payload_inline_bytes``) is read back in full.

        Raises:
            RunNotFound: no such run.
        """
        from ductline.store import payloads

        return codec.loads(payloads.load(self._store, self.id, self._row()["output"]))

    def wait(self, timeout: float | None = None, *, poll_interval: float = 0.05) -> str:
        """Block until the run settles (completed, halted, failed or cancelled).

        Args:
            timeout: seconds to wait at most; ``None`` waits forever.
            poll_interval: seconds between looks at the database.

        Returns:
            The settled status.

        Raises:
            TimeoutError: the run had not settled within ``timeout`` seconds.
        """
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status()
            if status in SETTLED:
                return status
            if end is not None and time.monotonic() >= end:
                raise TimeoutError(f"run {self.id} is still {status} after {timeout} s")
            time.sleep(poll_interval)

    def cancel(self) -> None:
        """Cancel the run: in-flight attempts are killed and recorded ``cancelled``,
        the rest skipped with reason ``cancelled``, the run status ``cancelled``.

        Raises:
            InvalidStateError: the run already finished.
            RunNotFound: no such run.
        """
        from ductline.dsl.pipeline import _REGISTRY
        from ductline.runtime.abort import cancel_run

        row = self._row()
        known = _REGISTRY.get(row["pipeline"])
        cancel_run(self._store, self.id, known.definition() if known is not None else None)

    def resume(self, input: Any = NO_INPUT) -> list[str]:
        """Resume a paused run (``.pause(before=step)``): the paused step becomes
        ready at once (workers are woken) and the run ``running`` again.

        Args:
            input: the paused step's new single argument, any value that
                round-trips through JSON (``None`` passes null); omit it to run
                the step with the input it was paused with.

        Returns:
            The names of the steps resumed.

        Raises:
            TypeError: ``input`` does not round-trip through JSON. Nothing is changed.
            PayloadTooLarge: ``input`` is above ``payload_max_bytes`` as JSON (above
                ``payload_inline_bytes`` it is stored out of line). Nothing is changed.
            InvalidStateError: the run is not paused (of two racing resumes, the
                loser gets this), its pause has expired (``pause_expires_ms`` passed
                on the database clock: it fails closed), or an input was given
                while several step runs are paused. Nothing is changed.
            RunNotFound: no such run.
        """
        from ductline.runtime.pause import resume

        resumed = resume(self._store, self.id, input)
        return sorted({r["step"] for r in resumed})

    def __repr__(self) -> str:
        return f"RunHandle({self.id!r})"
