"""The claim ahead of a kill: an attempt about to be killed at its deadline gets its
slot's next job claimed ahead (`ENDING_LEAD_SECONDS` before it).

When the kill frees the slot, the next attempt starts on a warm child at once, and
the killed attempt's failure is recorded in a transaction of its own right away,
with no claim before it. A job claimed so is held for its slot (`Successors.held`):
an attempt that nears its deadline while another's successor waits in the queue
gets one of its own, and neither is sent ahead to another child
(`ductline.runtime.prefetch`).
"""

from __future__ import annotations

from typing import Callable

from ductline.execution.enforcer import Enforcer
from ductline.runtime.ahead import Ahead
from ductline.runtime.slots import Slot

# How long before an attempt's deadline the job that follows it on its slot is
# claimed (seconds): longer than a claim takes, short enough that a job is rarely
# held from other workers for an attempt that then ends in time (it then starts
# on the slot that attempt freed, as any job claimed ahead).
ENDING_LEAD_SECONDS = 0.05


class Successors:
    """The attempts nearing their deadlines whose successors are claimed ahead.

    Args:
        slots: the worker's slots.
        enforcer: watches the attempts' deadlines (by slot index).
        ahead: the queue of jobs claimed ahead, where the successors wait.
        renew_now: asks the heartbeat to renew the leases on this turn of the loop.
    """

    def __init__(self, slots: list[Slot], enforcer: Enforcer, ahead: Ahead,
                 renew_now: Callable[[], None]) -> None:
        self._slots = slots
        self._enforcer = enforcer
        self._ahead = ahead
        self._renew_now = renew_now
        # Slots (by index) whose attempt nearing its deadline already had its
        # successor claimed ahead, with that attempt's deadline (one claim per attempt).
        self._covered: dict[int, float] = {}

    def held(self) -> int:
        """How many jobs of the queue ahead are held for the attempts that had their
        successor claimed ahead and have not ended yet (at most; a claim may have found
        fewer): those jobs start on these attempts' slots, not ahead on other children."""
        if not self._covered:
            return 0  # the common case, asked on every turn of the loop: no lock taken
        self._forget_ended(self._enforcer.deadlines())
        return len(self._covered)

    def wake_times(self, now: float) -> list[float]:
        """When the loop must wake to claim the successors of attempts nearing their
        deadlines (monotonic): only times to come -- one already past is due now
        (`ending`), and if the claim cannot run (an outage) the loop must not spin on it."""
        return [at for at in (d - ENDING_LEAD_SECONDS for d in self._uncovered().values()) if at > now]

    def ending(self, now: float) -> dict[int, float]:
        """The uncovered slots whose attempt ends by its deadline within
        `ENDING_LEAD_SECONDS` (or is past it, being killed), beyond what the queue
        ahead already holds for them. When the queue holds their successors, those
        count as claimed for them; if their leases would be too old to start on at
        the deadline (`Ahead.stale`: they waited behind the long attempts), a
        renewal is asked for now, not when the kill frees the slots."""
        ending = {i: d for i, d in self._uncovered().items() if d - now <= ENDING_LEAD_SECONDS}
        if not ending or len(ending) > self._unheld():
            return ending
        self._covered.update(ending)
        if self._ahead.stale(max(ending.values())):
            self._renew_now()
        return {}

    def wanted(self, now: float) -> int:
        """How many jobs a claim now takes ahead for attempts about to be killed
        (`ending`), less the queued jobs not held for others (negative: the queue
        holds more than they need); those attempts count as covered from now on."""
        ending = self.ending(now)
        unheld = self._unheld()
        self._covered.update(ending)
        return len(ending) - unheld

    def _forget_ended(self, deadlines: dict[int, float]) -> None:
        """Covered attempts that ended (their slot's deadline is gone or another's)
        hold nothing any more."""
        self._covered = {i: d for i, d in self._covered.items() if deadlines.get(i) == d}

    def _uncovered(self) -> dict[int, float]:
        """The busy slots whose attempt has a deadline and no successor claimed ahead
        for it yet: slot index -> that deadline (monotonic seconds)."""
        deadlines = self._enforcer.deadlines()
        if self._covered:
            self._forget_ended(deadlines)
        return {i: d for i, d in deadlines.items()
                if self._covered.get(i) != d and self._slots[i].busy and not self._slots[i].undead}

    def _unheld(self) -> int:
        """The jobs queued ahead beyond those held for covered attempts (`held`):
        one queued for an attempt that ends first is not another's successor."""
        return max(0, len(self._ahead) - len(self._covered))
