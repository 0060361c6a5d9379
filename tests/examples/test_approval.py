"""examples/approval.py end to end on a real worker: a refund waits for a person,
is resumed from the CLI with an approval, or from Python without one."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples_helpers import EXAMPLES, ductline, last_json, show
from helpers import start_worker, stop_worker, wait_for

from ductline import RunHandle

EXAMPLE = EXAMPLES / "approval.py"


def trigger(refund: str, database: str, cwd: Path) -> RunHandle:
    started = last_json(ductline("trigger", f"{EXAMPLE}:refunds", "--args", f"[{refund}]", "--json",
                                 "--database", database, cwd=cwd))
    return RunHandle.attach(started["run_id"], database=database)


@pytest.mark.timeout(300)  # processes that start and stop: slow on a loaded machine
def test_refunds_wait_for_a_person(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'ductline.db'}"
    ductline("migrate", "--database", database, cwd=tmp_path)
    worker = start_worker(database, app=str(EXAMPLE))
    try:
        approved = trigger('{"order": "A-1001", "amount": 750}', database, tmp_path)
        rejected = trigger('{"order": "A-1002", "amount": 90}', database, tmp_path)
        wait_for(lambda: approved.status() == "paused" and rejected.status() == "paused", timeout=60)

        view = show(approved.id, database, tmp_path)
        pay_out = next(s for s in view["steps"] if s["step"] == "pay_out")
        assert pay_out["status"] == "paused" and pay_out["pause_expires"] and not pay_out["attempts"]
        assessed = next(s for s in view["steps"] if s["step"] == "assess")
        assert assessed["status"] == "completed"

        # The person approves the first refund from the CLI, with a new input ...
        ductline("resume", approved.id, "--input",
                 '{"order": "A-1001", "amount": 750, "approved_by": "maria"}',
                 "--database", database, cwd=tmp_path)
        # ... and resumes the second from Python without one: nobody approved it.
        assert rejected.resume() == ["pay_out"]

        assert approved.wait(60) == "completed", approved.error()
        assert rejected.wait(60) == "completed", rejected.error()
    finally:
        stop_worker(worker)

    assert approved.output() == "order A-1001: refund paid (750 EUR)"
    assert rejected.output() == "order A-1002: refund rejected (0 EUR)"
    paid = next(s for s in show(approved.id, database, tmp_path)["steps"] if s["step"] == "pay_out")
    assert paid["boundary"], paid           # the payment crossed its boundary before money moved


def test_resuming_a_run_that_is_not_paused_changes_nothing(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'ductline.db'}"
    ductline("migrate", "--database", database, cwd=tmp_path)
    handle = trigger('{"order": "A-1003", "amount": 20}', database, tmp_path)   # no worker: pending
    proc = ductline("resume", handle.id, "--database", database, cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "InvalidStateError" in proc.stderr or "not paused" in proc.stderr, proc.stderr
    assert handle.status() == "pending"
