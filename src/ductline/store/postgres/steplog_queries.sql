-- Step logs: the records an attempt logged (ductline.store.steplogs).

-- name: step_log_append
-- A batch of records, [[at_ms, level, logger, message], ...] as JSON, numbered from
-- first_seq, in one statement; written only while the attempt still holds this lease
-- token, so a batch that arrives after the lease was lost is dropped (fencing).
-- The job's row is share-locked until the batch commits: a prune of the run (which
-- locks its jobs first, prune_busy) either skips the run as busy or has deleted the
-- attempt before this reads it -- never a batch left behind for a run that is gone.
INSERT INTO ductline_step_logs (job_id, attempt, seq, run_id, at_ms, level, logger, message)
SELECT a.job_id, a.attempt, :first_seq::bigint + r.ord - 1, a.run_id, (r.value->>0)::bigint,
       r.value->>1, r.value->>2, r.value->>3
FROM ductline_attempts a JOIN ductline_jobs j ON j.id = a.job_id,
     jsonb_array_elements(:records::jsonb) WITH ORDINALITY AS r(value, ord)
WHERE a.job_id = :job_id::text AND a.attempt = :attempt::bigint AND a.lease_token = :lease_token::text
FOR SHARE OF j;

-- name: step_logs_of_run
-- A run's records (of one step, when given), oldest first, with the step run they belong to.
SELECT l.job_id, l.attempt, l.seq, l.at_ms, l.level, l.logger, l.message, j.step, j.scope
FROM ductline_step_logs l JOIN ductline_jobs j ON j.id = l.job_id
WHERE l.run_id = :run_id::text AND (:step::text IS NULL OR j.step = :step::text)
ORDER BY l.at_ms, l.job_id, l.attempt, l.seq
LIMIT :limit;
