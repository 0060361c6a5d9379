"""Concurrency and rate limits in the in-process executor: the workers' rules within
one run."""

from __future__ import annotations

import uuid

import ductline
import local_steps as s
from ductline import Pipeline
from ductline.testing import FakeClock


def name() -> str:
    return f"limits_{uuid.uuid4().hex[:10]}"


def most_at_once(spans):
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], e[1]))
    open_, best = 0, 0
    for _, step in events:
        open_ += step
        best = max(best, open_)
    return best


def test_an_expand_runs_at_most_concurrency_elements_at_once(tmp_path) -> None:
    pipeline = (Pipeline(name()).start(s.numbered_in).expand(to=s.meet_in_pairs, concurrency=2)
                .collapse(into=s.gather))
    result = ductline.execute(pipeline, [str(tmp_path), 6], concurrency=6)
    assert result.output == [0, 1, 2, 3, 4, 5]
    spans = [(r.started_at, r.finished_at) for r in result.steps if r.step == "meet_in_pairs"]
    assert most_at_once(spans) == 2  # the first two wait for each other; never a third


def test_rate_limited_elements_start_spaced() -> None:
    """A rate hands out start slots 1/rate apart on the store's clock (the workers'
    rule); on a fake clock each start is exactly its slot."""
    pipeline = Pipeline(name()).start(s.make_list).expand(to=s.identity, rate=10).collapse(into=s.gather)
    result = ductline.execute(pipeline, 5, concurrency=5, clock=FakeClock())
    starts = sorted(r.started_at for r in result.steps if r.step == "identity")
    gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:])]
    assert all(abs(gap - 0.1) <= 0.002 for gap in gaps), gaps  # 10 per second


def test_rate_limited_elements_take_their_slots_in_real_time() -> None:
    pipeline = Pipeline(name()).start(s.make_list).expand(to=s.identity, rate=10).collapse(into=s.gather)
    result = ductline.execute(pipeline, 5, concurrency=5)
    starts = sorted(r.started_at for r in result.steps if r.step == "identity")
    assert (starts[-1] - starts[0]).total_seconds() >= 0.39  # four slots after the first, at the least
