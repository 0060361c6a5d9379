"""The run page shows a run's priority and a step run waiting for a concurrency slot."""

from __future__ import annotations

import limit_app

from ductline.store.records import StepLimit


def test_run_page_shows_priority_and_a_throttled_step(client, sqlite_store):
    handles = [limit_app.capped.trigger(i, priority=9, database=sqlite_store) for i in range(3)]
    claimed = sqlite_store.claim("w", ["capped"], 5, 60_000, limits={("capped", "hold"): StepLimit(2, None)})
    assert len(claimed) == 2
    waiting = next(h for h in handles if h.id not in {c.run_id for c in claimed})
    html = client.get(f"/runs/{waiting.id}").text
    assert 'data-step="hold" data-state="throttled"' in html
    assert "<dt>priority</dt><dd>9</dd>" in html
