-- Pause before a step for a human (`.pause(before=)`): a paused job is one row with
-- status 'paused' (no thread, no lease) and, if the pause has a timeout, the time
-- pause_expires_ms (database clock) at which the run fails closed. The statements
-- both dialects run as written; each dialect's pause_queries.sql holds the others.

-- name: pause_run
-- A halted run stays halted (its retry sets it back to paused: revive_run).
UPDATE ductline_runs SET status = 'paused' WHERE id = :run_id AND status IN ({PAUSABLE_RUN});

-- name: run_paused_jobs
SELECT id, step, scope, elem_index, pause_expires_ms FROM ductline_jobs
WHERE run_id = :run_id AND status = 'paused'
ORDER BY created_ms, coalesce(elem_index, -1), scope;

-- name: resume_run
UPDATE ductline_runs SET status = 'running'
WHERE id = :run_id AND status = 'paused'
  AND NOT EXISTS (SELECT 1 FROM ductline_jobs j WHERE j.run_id = :run_id AND j.status = 'paused');

-- name: expired_pauses
-- The partial index ductline_jobs_paused (pause_expires_ms) WHERE status = 'paused'.
-- The clock in a scalar subquery: PostgreSQL reads its (volatile) ductline_now_ms()
-- once there, as an index bound, rather than once per row; SQLite reads 'now' once
-- per statement either way.
SELECT id, run_id, pipeline, step, scope, elem_index, pause_expires_ms, created_ms, definition FROM ductline_jobs
WHERE status = 'paused' AND pause_expires_ms <= (SELECT ductline_now_ms())
ORDER BY pause_expires_ms
LIMIT :limit;

-- name: expire_paused_job
UPDATE ductline_jobs
SET status = 'failed', skip_reason = :reason, finished_ms = ductline_now_ms()
WHERE id = :job_id AND status = 'paused' AND pause_expires_ms <= ductline_now_ms();

-- name: paused_job_input
-- The input a paused job waits with (a resume callback of the in-process executor
-- is given it).
SELECT input FROM ductline_jobs WHERE id = :job_id AND status = 'paused';
