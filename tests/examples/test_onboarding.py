"""examples/onboarding.py end to end through ``ductline run``, with a day shortened to
one second: three mails, each no earlier than its delay after the previous step."""

from __future__ import annotations

from pathlib import Path

import pytest

from examples_helpers import EXAMPLES, at, ductline, last_json, show

EXAMPLE = EXAMPLES / "onboarding.py"


@pytest.mark.timeout(300)  # processes that start and stop: slow on a loaded machine
def test_the_sequence_sends_three_mails_days_apart(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'ductline.db'}"
    outbox = tmp_path / "outbox"
    run = last_json(ductline(
        "run", f"{EXAMPLE}:onboarding", "--args", '[{"email": "ada@example.com", "name": "Ada"}]', "--json",
        "--database", database, cwd=tmp_path,
        extra_env={"ONBOARDING_DAY_SECONDS": "1", "ONBOARDING_OUTBOX": str(outbox)}))
    assert run["status"] == "completed", run
    assert run["output"]["sent"] == ["welcome", "tips", "feedback"]

    mails = sorted(p.name for p in outbox.iterdir())
    assert mails == ["ada-example-com--feedback.txt", "ada-example-com--tips.txt", "ada-example-com--welcome.txt"]
    welcome = (outbox / "ada-example-com--welcome.txt").read_text(encoding="utf-8")
    assert welcome.startswith("To: ada@example.com\nSubject: Welcome, Ada\n")

    steps = {s["step"]: s["attempts"][-1] for s in show(run["run_id"], database, tmp_path)["steps"]}
    gap = {
        "send_tips": (at(steps["send_tips"]["started_at"]) - at(steps["send_welcome"]["finished_at"])),
        "send_feedback_request": (at(steps["send_feedback_request"]["started_at"])
                                  - at(steps["send_tips"]["finished_at"])),
    }
    # A delay is a lower bound on the database clock: never early (one "day" is 1 s here).
    assert gap["send_tips"].total_seconds() >= 2, gap
    assert gap["send_feedback_request"].total_seconds() >= 5, gap


def test_a_bad_address_fails_at_once_and_sends_nothing(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'ductline.db'}"
    outbox = tmp_path / "outbox"
    proc = ductline("run", f"{EXAMPLE}:onboarding", "--args", '[{"email": "not-an-address"}]', "--json",
                    "--database", database, cwd=tmp_path, check=False,
                    extra_env={"ONBOARDING_DAY_SECONDS": "1", "ONBOARDING_OUTBOX": str(outbox)})
    assert proc.returncode != 0
    run = last_json(proc)
    assert run["status"] == "halted" and run["halt_reason"] == "non_retryable_error", run
    assert not outbox.exists()
