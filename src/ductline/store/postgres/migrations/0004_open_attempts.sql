-- 0004: attempts still open (result IS NULL) are found by an index, so recording a
-- batch of results costs the same with ten or ten million finished attempts.
CREATE INDEX ductline_attempts_open ON ductline_attempts (job_id, attempt) WHERE result IS NULL;
