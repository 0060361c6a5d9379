-- 0012: a job's consecutive releases at a worker's shutdown grace (each attempt
-- interrupted so is given back without charging max_retry or max_crash). The rulebook
-- halts the run at ductline.model.outcomes.MAX_RELEASES (job_releases_exhausted);
-- an attempt that ends any other way, and a retry of the run, set it back to 0.
ALTER TABLE ductline_jobs ADD COLUMN releases BIGINT NOT NULL DEFAULT 0;
