"""The step log verbs on both backends: a batch is stored in order, fenced by the
attempt's lease token, with any text made storable; a run's records read by step."""

from __future__ import annotations

import log_app

from ductline.store import steplogs


def _claimed(store):
    handle = log_app.retrying.trigger(1, database=store)
    [job] = store.claim("contract", ["log_retry"], 1, 60_000)
    return handle, job


def test_a_batch_is_stored_in_order_with_any_text(store):
    handle, job = _claimed(store)
    texts = ["plain", "accents é ü 漢字 🙂", "nul \x00 inside", "lone \udc80 surrogate", "multi\nline"]
    steplogs.append(store.dialect, job.job_id, job.attempt, job.lease_token, 0,
                    [(1_700_000_000_000 + i, "INFO", "stdout", t) for i, t in enumerate(texts)])
    steplogs.append(store.dialect, job.job_id, job.attempt, job.lease_token, len(texts),
                    [(1_700_000_000_100, "ERROR", "app.log", "second batch")])
    records = steplogs.of_run(store.dialect, handle.id)
    assert [r.seq for r in records] == list(range(6))
    assert [r.message for r in records] == ["plain", "accents é ü 漢字 🙂", "nul \\x00 inside",
                                            "lone \\udc80 surrogate", "multi\nline", "second batch"]
    assert (records[-1].level, records[-1].logger, records[-1].step, records[-1].attempt) == \
        ("ERROR", "app.log", "flaky", 1)
    assert records[0].at_ms == 1_700_000_000_000
    assert steplogs.of_run(store.dialect, handle.id, step="other") == []
    assert len(steplogs.of_run(store.dialect, handle.id, step="flaky")) == 6


def test_a_level_name_with_nul_or_a_lone_surrogate_is_stored_escaped_with_its_batch(store):
    """A step may name a level as it likes (`logging.addLevelName`): such a name
    once cost the whole batch on PostgreSQL, and on SQLite was stored cut at the NUL
    or as bytes that made every read of the run's records fail."""
    handle, job = _claimed(store)
    levels = ["WARNING", "NO\x00TE", "TR\ud800CE", "WARNING"]
    steplogs.append(store.dialect, job.job_id, job.attempt, job.lease_token, 0,
                    [(1_700_000_000_000 + i, level, "app", f"line {i}") for i, level in enumerate(levels)])
    records = steplogs.of_run(store.dialect, handle.id)
    assert [(r.level, r.message) for r in records] == [
        ("WARNING", "line 0"), ("NO\\x00TE", "line 1"), ("TR\\ud800CE", "line 2"), ("WARNING", "line 3")]


def test_a_batch_of_a_lost_lease_is_dropped(store):
    handle, job = _claimed(store)
    steplogs.append(store.dialect, job.job_id, job.attempt, "not-the-token", 0, [(1, "INFO", "stdout", "late")])
    steplogs.append(store.dialect, job.job_id, job.attempt, job.lease_token, 0, [])
    assert steplogs.of_run(store.dialect, handle.id) == []
