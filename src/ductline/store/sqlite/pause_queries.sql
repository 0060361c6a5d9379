-- Pause before a step for a human (`.pause(before=)`): a paused job is one row with
-- status 'paused' (no thread, no lease) and, if the pause has a timeout, the time
-- pause_expires_ms (database clock) at which the run fails closed.

-- name: pause_job
-- Runs right after insert_job stored the job 'paused', in the same transaction.
UPDATE ductline_jobs
SET pause_expires_ms = CASE WHEN :timeout_ms IS NULL THEN NULL ELSE ductline_now_ms() + :timeout_ms END
WHERE id = :job_id AND status = 'paused';

-- name: pause_run
-- A halted run stays halted (its retry sets it back to paused: revive_run).
UPDATE ductline_runs SET status = 'paused' WHERE id = :run_id AND status IN ('pending', 'running');

-- name: run_paused_jobs
SELECT id, step, scope, elem_index, pause_expires_ms FROM ductline_jobs
WHERE run_id = :run_id AND status = 'paused'
ORDER BY created_ms, coalesce(elem_index, -1), scope;

-- name: resume_jobs
-- Ready now (or at the end of the step's own delay, if that is later); fenced on
-- status = 'paused', so of two racing resumes only the first changes these rows,
-- and on the expiry, so a pause that expired is never resumed (it fails closed).
UPDATE ductline_jobs
SET status = 'pending', input = coalesce(:input, input),
    not_before_ms = CASE WHEN not_before_ms > ductline_now_ms() THEN not_before_ms ELSE ductline_now_ms() END
WHERE status = 'paused' AND id IN (SELECT value FROM json_each(:job_ids))
  AND (pause_expires_ms IS NULL OR pause_expires_ms > ductline_now_ms());

-- name: resume_run
UPDATE ductline_runs SET status = 'running'
WHERE id = :run_id AND status = 'paused'
  AND NOT EXISTS (SELECT 1 FROM ductline_jobs j WHERE j.run_id = :run_id AND j.status = 'paused');

-- name: expired_pauses
-- The partial index ductline_jobs_paused (pause_expires_ms) WHERE status = 'paused'.
SELECT id, run_id, pipeline, step, scope, elem_index, pause_expires_ms, created_ms FROM ductline_jobs
WHERE status = 'paused' AND pause_expires_ms <= ductline_now_ms()
ORDER BY pause_expires_ms
LIMIT :limit;

-- name: expire_paused_job
UPDATE ductline_jobs
SET status = 'failed', skip_reason = :reason, finished_ms = ductline_now_ms()
WHERE id = :job_id AND status = 'paused' AND pause_expires_ms <= ductline_now_ms();
