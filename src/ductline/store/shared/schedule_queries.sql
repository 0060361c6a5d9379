-- Statements of schedules (ductline.store.schedules). A tick is owned by the worker
-- whose compare-and-set on next_fire_ms succeeds, in the transaction that inserts the
-- tick's run. The statements both dialects run as written; each dialect's
-- schedule_queries.sql holds the others.

-- name: upsert_schedule
-- A worker's definition of a schedule. next_fire_ms is kept unless the cron changed or
-- the schedule comes back after it was removed from code; enabled (the operator's
-- switch) is never touched here.
INSERT INTO ductline_schedules (name, pipeline, cron, args, enabled, defined, next_fire_ms, updated_ms)
VALUES (:name, :pipeline, :cron, :args, 1, 1, :next_fire_ms, ductline_now_ms())
ON CONFLICT (name) DO UPDATE SET
    next_fire_ms = CASE WHEN ductline_schedules.cron <> excluded.cron OR ductline_schedules.defined = 0
                        THEN excluded.next_fire_ms ELSE ductline_schedules.next_fire_ms END,
    pipeline = excluded.pipeline, cron = excluded.cron, args = excluded.args, defined = 1,
    updated_ms = excluded.updated_ms;

-- name: advance_schedule
-- The compare-and-set that owns a tick: only the writer that still sees the
-- next_fire_ms (and cron) it judged moves it on.
UPDATE ductline_schedules
SET next_fire_ms = :next_fire_ms, last_fire_ms = coalesce(:last_fire_ms, last_fire_ms),
    last_run_id = coalesce(:last_run_id, last_run_id), updated_ms = ductline_now_ms()
WHERE name = :name AND next_fire_ms = :expected_ms AND cron = :cron AND enabled = 1 AND defined = 1;

-- name: set_schedule_run
UPDATE ductline_schedules SET last_run_id = :run_id WHERE name = :name;

-- name: set_run_metadata
UPDATE ductline_runs SET metadata = :metadata WHERE id = :run_id;

-- name: list_schedules
SELECT name, pipeline, cron, args, enabled, defined, next_fire_ms, last_fire_ms, last_run_id, updated_ms
FROM ductline_schedules ORDER BY name;

-- name: set_schedule_enabled
UPDATE ductline_schedules
SET enabled = :enabled, next_fire_ms = coalesce(:next_fire_ms, next_fire_ms), updated_ms = ductline_now_ms()
WHERE name = :name;

-- name: claim_schedule_tick
-- Claims one tick for the run about to be inserted in this transaction; 0 rows: the
-- tick has a run already (tick_run names it).
INSERT INTO ductline_schedule_ticks (schedule, tick_ms, run_id, created_ms)
VALUES (:schedule, :tick_ms, :run_id, ductline_now_ms())
ON CONFLICT (schedule, tick_ms) DO NOTHING;

-- name: set_tick_run
-- A claimed tick whose run was already started under the tick's key (an active run
-- holding it): the tick names that run.
UPDATE ductline_schedule_ticks SET run_id = :run_id WHERE schedule = :schedule AND tick_ms = :tick_ms;

-- name: tick_runs
-- The runs of a schedule's ticks in [from_ms, to_ms], oldest tick first.
SELECT tick_ms, run_id FROM ductline_schedule_ticks
WHERE schedule = :schedule AND tick_ms >= :from_ms AND tick_ms <= :to_ms
ORDER BY tick_ms;

-- name: get_schedule
SELECT name, pipeline, cron, args, enabled, defined, next_fire_ms FROM ductline_schedules WHERE name = :name;
