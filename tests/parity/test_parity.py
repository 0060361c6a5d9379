"""Parity: every case of the corpus runs through `ductline.execute`, a real worker
on SQLite and a real worker on PostgreSQL; the three records must be equal (run
status, halt reason, per step run: status, attempt results in order, skip reason
and root, decoded output) and match what the case expects.

Both drivers decide with one rulebook (`ductline.model`); a difference here is a
driver that restates or skips a rule. Run alone with
``python -m pytest -q -n 0 tests/parity``.
"""

from __future__ import annotations

import pytest
from parity_cases import CASES
from parity_harness import Case, Fleet, LocalRuns, compare, from_execute


# The longest cases first, the order the drivers start them in (conftest.py), so each
# test finds its records ready or nearly so.
ORDERED = sorted(CASES, key=lambda c: -c.seconds)


@pytest.mark.parametrize("case", ORDERED, ids=[c.name for c in ORDERED])
def test_parity(case: Case, fleets: dict[str, Fleet], local_runs: LocalRuns) -> None:
    for fleet in fleets.values():
        fleet.want(case)  # already under way unless this process runs a share of the tests (xdist)
    local = from_execute(local_runs.result(case))
    records = {"sqlite worker": fleets["sqlite"].record(case),
               "postgres worker": fleets["postgres"].record(case),
               "execute": local}
    compare(case, records)
