"""Fan-ins inside a store transaction: counting arrivals, gathering outputs."""

from __future__ import annotations

import json

from ductline.store.tx.base import TxBase


class FaninVerbs(TxBase):
    """The verbs of fan-ins."""

    def create_fanin(self, run_id: str, step: str, scope: str, expected: int) -> None:
        self.s.execute("create_fanin", {"run_id": run_id, "step": step, "scope": scope,
                                        "expected": expected})

    def arrive_fanins(self, arrivals: list[tuple[str, str, str, int, int]]) -> set[tuple[str, str, str]]:
        """Count arrivals at fan-ins, ``(run_id, step, scope, expected, n)`` each (``n``
        arrivals; ``expected`` is used if this creates the row, -1 for a row that
        exists already), in one statement. Returns the ``(run_id, step, scope)`` of
        those these arrivals completed: each fan-in once, in the transaction whose
        count reaches its expected number."""
        if not arrivals:
            return set()
        # Two batches arriving at the same fan-ins must lock them in one order; the
        # statement's ORDER BY sets it (in the database's collation). Sorting here only
        # keeps the parameter the same for the same arrivals.
        rows = self.s.fetch("arrive_fanins", {"items": json.dumps([
            {"run_id": r, "step": st, "scope": sc, "expected": e, "n": n}
            for r, st, sc, e, n in sorted(arrivals)])})
        return {(row["run_id"], row["step"], row["scope"]) for row in rows
                if int(row["arrived"]) == int(row["expected"])}

    def gather_elements(self, run_id: str, step: str, parent_scope: str) -> list[str]:
        rows = self.s.fetch("gather_elements", {"run_id": run_id, "step": step,
                                                "parent_scope": parent_scope})
        return [r["output"] for r in rows]

    def gather_branches(self, run_id: str, scope: str, steps: list[str]) -> dict[str, str]:
        rows = self.s.fetch("gather_branches", {"run_id": run_id, "scope": scope,
                                                "steps": json.dumps(steps)})
        return {r["step"]: r["output"] for r in rows}
