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


def test_overview_counts_throttled_jobs_and_lists_schedules(client, sqlite_store):
    import sqlite3

    for i in range(3):
        limit_app.capped.trigger(i, database=sqlite_store)
    sqlite_store.claim("w", ["capped"], 5, 60_000, limits={("capped", "hold"): StepLimit(2, None)})
    path = sqlite_store.url.removeprefix("sqlite:///")
    conn = sqlite3.connect(path)
    now = sqlite_store.now_ms()
    conn.execute("INSERT INTO ductline_schedules (name, pipeline, cron, args, enabled, defined, next_fire_ms, "
                 "updated_ms) VALUES ('nightly', 'capped', '0 3 * * *', '[]', 1, 1, ?, ?)", (now + 60_000, now))
    conn.execute("INSERT INTO ductline_schedules (name, pipeline, cron, args, enabled, defined, next_fire_ms, "
                 "updated_ms) VALUES ('old', 'capped', '* * * * *', '[]', 0, 1, ?, ?)", (now, now))
    conn.commit()
    conn.close()
    html = client.get("/").text
    assert 'data-jobs="throttled"><span class="num">1</span>' in html
    assert '<tr data-schedule="nightly">' in html and "0 3 * * *" in html
    assert f'data-until-ms="{now + 60_000}"' in html
    assert '<tr data-schedule="old">' in html and "<td>disabled</td>" in html
