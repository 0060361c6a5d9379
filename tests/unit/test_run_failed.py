"""`RunFailed`'s message: the run, its status and the halt reason said once."""

import pickle

from ductline.errors import RunFailed


def test_a_halted_runs_reason_is_said_once_when_its_error_ends_with_it():
    error = "step 'a' failed: ValueError: boom (job_retries_exhausted)"
    failed = RunFailed("r1", "halted", "job_retries_exhausted", error)
    assert str(failed) == f"run r1 halted: {error}"


def test_the_reason_follows_the_status_when_the_error_does_not_say_it():
    failed = RunFailed("r1", "halted", "pause_expired", "the pause of step 'a' expired")
    assert str(failed) == "run r1 halted (pause_expired): the pause of step 'a' expired"
    assert str(RunFailed("r1", "cancelled", None, "the run was cancelled")) == "run r1 cancelled: the run was cancelled"
    assert str(RunFailed("r1", "halted", "job_retries_exhausted", None)) == "run r1 halted (job_retries_exhausted)"


def test_it_pickles_with_its_fields():
    failed = pickle.loads(pickle.dumps(RunFailed("r1", "halted", "x", "e (x)")))
    assert (failed.run_id, failed.status, failed.halt_reason, failed.error) == ("r1", "halted", "x", "e (x)")
