-- Statements of concurrency and rate limits both dialects run as written; the claims
-- and the key locks, which each dialect takes its own way, are in its limit_queries.sql.

-- name: save_rate_last_start
INSERT INTO ductline_rate_slots (limit_key, last_start_ms) VALUES (:limit_key, :last_start_ms)
ON CONFLICT (limit_key) DO UPDATE SET last_start_ms = excluded.last_start_ms;

-- name: defer_jobs
-- A job that must wait for its rate slot: it becomes ready at the slot, and holds it.
UPDATE ductline_jobs SET not_before_ms = :not_before_ms, rate_slot_ms = :not_before_ms
WHERE id = :id AND status = 'pending';

-- name: unthrottle_next
-- :n slots of the key freed: the next :n throttled jobs (highest priority, then
-- oldest) become ready again.
UPDATE ductline_jobs SET throttled = 0
WHERE id IN (SELECT id FROM ductline_jobs
             WHERE limit_key = :limit_key AND throttled = 1 AND status = 'pending'
             ORDER BY priority DESC, not_before_ms LIMIT :n);
