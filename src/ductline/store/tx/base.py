"""The state one write transaction keeps for its verbs (`ductline.store.tx.Tx`),
and the verbs the others build on: the database clock, leases, waking the workers
and locking runs."""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

from ductline.store.session import Session


class TxBase:
    """What one write transaction keeps, and the verbs every concern uses."""

    def __init__(self, session: Session, *, per_level_claims: bool = False, fused: bool = False) -> None:
        self.s = session
        self._per_level = per_level_claims  # the dialect claims one priority level per statement
        # The dialect runs some sequences as one statement (each statement is a round
        # trip to a server): claim_start_jobs, complete_close_jobs.
        self._fused = fused
        # The payload of this transaction's notifications: the recording worker's id,
        # so that worker ignores what it sent itself (`ductline.runtime.wakeup`).
        self.origin = ""
        self._locked_runs: set[str] = set()  # by lock_runs, until the commit
        # Runs this transaction ended, with their parent (run, awaiting job) if they are
        # child runs: read by the statement that ended them, so finding the parents
        # to wake needs no query of its own (`ductline.store.children.parents_of`).
        self.ended_parents: dict[str, tuple[str, str] | None] = {}
        self.claimed: set[str] = set()  # ids of the jobs this transaction claimed
        # What this transaction made ready or waiting, for `readied_only_claimed`: the
        # jobs it inserted, and whether anything else asked to wake the workers.
        self._inserted: set[str] = set()
        self._woke = False
        # What to do once this transaction committed (the engine's events of what it
        # changed besides its caller's own records: a parent woken by its last child).
        self.after_commit: list[Callable[[], None]] = []
        # What the last claim read for next_wakeups, for these pipelines and served
        # queues and definitions (taken by the next call; the claimers call it right
        # after the claim, before any write).
        self._wakeups: tuple[tuple[Any, ...], tuple[int | None, int | None]] | None = None

    def now_ms(self) -> int:
        """The database clock, read inside this transaction."""
        return int(self.s.fetch("now")[0]["now_ms"])

    def confirm_leases(self, leases: Sequence[tuple[str, str]]) -> set[str]:
        """`Store.confirm_leases` in this transaction: ``leases`` as ``(job id, lease
        token)`` pairs; the tokens still held."""
        rows = self.s.fetch("confirm_leases", {"job_ids": json.dumps([job_id for job_id, _ in leases]),
                                               "tokens": json.dumps([token for _, token in leases])})
        return {r["lease_token"] for r in rows}

    def notify(self) -> None:
        """Wake workers when this transaction commits: jobs became ready."""
        self._woke = True
        self.s.fetch("notify", {"origin": self.origin})

    def lock_runs(self, run_ids: list[str]) -> dict[str, str]:
        """Lock these runs for recording their attempts' outcomes (taken first, in
        id order); returns their statuses. Serializes outcomes with stops of the
        same runs (`lock_run_for_stop`); claims are not held up.

        A run this transaction locked already is not asked again (its lock holds
        until the commit), nor in the result: a batch locks all its runs first, and
        recording each outcome then costs no further round trip for it.
        """
        wanted = sorted(set(run_ids) - self._locked_runs)
        if not wanted:
            return {}
        rows = self.s.fetch("lock_runs", {"run_ids": json.dumps(wanted)})
        self._locked_runs.update(wanted)
        return {r["id"]: r["status"] for r in rows}
