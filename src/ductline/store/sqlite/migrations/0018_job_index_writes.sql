-- 0018: fewer index entries written per job.
-- Open attempts: the primary key (job_id, attempt) finds them as well (every statement
-- that ends one attempt names both; the one that ends a run's open attempts reads
-- them by run), so the partial index on result IS NULL goes.
DROP INDEX ductline_attempts_open;
-- The elements of an expand, in order: gather_elements reads completed ones only, so
-- only they are entered. An element's insert and its claim write no entry here.
DROP INDEX ductline_jobs_elements;
CREATE INDEX ductline_jobs_elements ON ductline_jobs (run_id, step, parent_scope, elem_index)
    WHERE parent_scope IS NOT NULL AND status = 'completed';
