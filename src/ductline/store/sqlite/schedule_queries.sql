-- Statements of schedules (ductline.store.schedules) this dialect writes its own way
-- (JSON lists, locks); the rest, and how a tick is owned, in ../shared/schedule_queries.sql.

-- name: undefine_schedules
-- Schedules of the listed pipelines that the starting worker's code no longer declares.
UPDATE ductline_schedules SET defined = 0, updated_ms = ductline_now_ms()
WHERE defined = 1 AND pipeline IN (SELECT value FROM json_each(:pipelines))
  AND name NOT IN (SELECT value FROM json_each(:names));

-- name: upcoming_schedules
-- The earliest next fires of the schedules of these pipelines (the partial index
-- ductline_schedules_due), with the clock to judge them by: the due ones are fired,
-- the first one not due sets the worker's timer.
WITH clock AS (SELECT ductline_now_ms() AS now_ms)
SELECT s.name, s.pipeline, s.cron, s.args, s.next_fire_ms, clock.now_ms AS now_ms
FROM ductline_schedules AS s, clock
WHERE s.enabled = 1 AND s.defined = 1 AND s.pipeline IN (SELECT value FROM json_each(:pipelines))
ORDER BY s.next_fire_ms
LIMIT :limit;

-- name: schedule_for_update
SELECT name, cron, enabled FROM ductline_schedules WHERE name = :name;
