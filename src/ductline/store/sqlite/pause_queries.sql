-- Pause before a step for a human (`.pause(before=)`): the statements this dialect
-- writes its own way (typed parameters, JSON lists); the rest, and what a paused job
-- is, in ../shared/pause_queries.sql.

-- name: pause_job
-- Runs right after insert_job stored the job 'paused', in the same transaction.
UPDATE ductline_jobs
SET pause_expires_ms = CASE WHEN :timeout_ms IS NULL THEN NULL ELSE ductline_now_ms() + :timeout_ms END
WHERE id = :job_id AND status = 'paused';

-- name: resume_jobs
-- Ready now (or at the end of the step's own delay, if that is later); fenced on
-- status = 'paused', so of two racing resumes only the first changes these rows,
-- and on the expiry, so a pause that expired is never resumed (it fails closed).
UPDATE ductline_jobs
SET status = 'pending', input = coalesce(:input, input),
    not_before_ms = CASE WHEN not_before_ms > ductline_now_ms() THEN not_before_ms ELSE ductline_now_ms() END
WHERE status = 'paused' AND id IN (SELECT value FROM json_each(:job_ids))
  AND (pause_expires_ms IS NULL OR pause_expires_ms > ductline_now_ms());
