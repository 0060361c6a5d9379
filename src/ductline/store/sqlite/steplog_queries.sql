-- Step logs: the records an attempt logged (ductline.store.steplogs).

-- name: step_log_append
-- A batch of records, [[at_ms, level, logger, message], ...] as JSON, numbered from
-- first_seq, in one statement; written only while the attempt still holds this lease
-- token, so a batch that arrives after the lease was lost is dropped (fencing).
INSERT INTO ductline_step_logs (job_id, attempt, seq, run_id, at_ms, level, logger, message)
SELECT a.job_id, a.attempt, :first_seq + r.key, a.run_id, json_extract(r.value, '$[0]'),
       json_extract(r.value, '$[1]'), json_extract(r.value, '$[2]'), json_extract(r.value, '$[3]')
FROM ductline_attempts a, json_each(:records) r
WHERE a.job_id = :job_id AND a.attempt = :attempt AND a.lease_token = :lease_token;

-- name: step_logs_of_run
-- A run's records (of one step, when given), oldest first, with the step run they belong to.
SELECT l.job_id, l.attempt, l.seq, l.at_ms, l.level, l.logger, l.message, j.step, j.scope
FROM ductline_step_logs l JOIN ductline_jobs j ON j.id = l.job_id
WHERE l.run_id = :run_id AND (:step IS NULL OR j.step = :step)
ORDER BY l.at_ms, l.job_id, l.attempt, l.seq
LIMIT :limit;
