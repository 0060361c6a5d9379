"""`new_job_ids`: many job ids drawn at once are distinct ids of the usual shape."""

from __future__ import annotations

import re

from ductline.store.records import new_job_ids


def test_new_job_ids_are_distinct_hex_ids_of_32_digits() -> None:
    ids = new_job_ids(10_000) + new_job_ids(1)
    assert len(ids) == len(set(ids)) == 10_001
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert new_job_ids(0) == []
