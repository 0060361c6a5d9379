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


def test_a_batch_of_a_lost_lease_is_dropped(store):
    handle, job = _claimed(store)
    steplogs.append(store.dialect, job.job_id, job.attempt, "not-the-token", 0, [(1, "INFO", "stdout", "late")])
    steplogs.append(store.dialect, job.job_id, job.attempt, job.lease_token, 0, [])
    assert steplogs.of_run(store.dialect, handle.id) == []
