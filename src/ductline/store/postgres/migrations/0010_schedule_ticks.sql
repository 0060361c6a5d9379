-- 0010: the ticks of schedules that have a run: one row per (schedule, tick), written in
-- the transaction that inserts the tick's run, by the worker firing it (with catch-up)
-- or by a backfill. The primary key is the arbiter: a tick is claimed once, also by
-- racing backfills and workers (INSERT ... ON CONFLICT DO NOTHING), and stays claimed
-- after its run ended, so a repeated backfill starts nothing again.
CREATE TABLE ductline_schedule_ticks (
    schedule TEXT NOT NULL,
    tick_ms BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (schedule, tick_ms)
);
