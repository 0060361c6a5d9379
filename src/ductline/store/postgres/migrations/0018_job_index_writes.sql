-- 0018: fewer index entries written per job. An update that changes an indexed column
-- (or a column in an index's WHERE) writes a new entry into every index whose WHERE
-- the new row meets; one that changes none can stay on its page without any (a
-- heap-only update).
-- Open attempts: the primary key (job_id, attempt) finds them as well (every statement
-- that ends one attempt names both; the one that ends a run's open attempts reads
-- them by run), so the partial index on result IS NULL goes. With it
-- goes the only index on a column an attempt's end changes: its end can be a
-- heap-only update, given room on the page. Attempts are inserted a batch at a time
-- and ended together a moment later, before anything is pruned: half of each page is
-- left for their new versions (at 70 %, a quarter of the ends found no room).
DROP INDEX ductline_attempts_open;
ALTER TABLE ductline_attempts SET (fillfactor = 50);
-- The elements of an expand, in order: gather_elements reads completed ones only, so
-- only they are entered. An element's insert and its claim write no entry here.
DROP INDEX ductline_jobs_elements;
CREATE INDEX ductline_jobs_elements ON ductline_jobs (run_id, step, parent_scope, elem_index)
    WHERE parent_scope IS NOT NULL AND status = 'completed';
-- Jobs: room on each page for a job's next version. Its claim and its end change an
-- indexed column, so they are never heap-only, but a new version on the old one's
-- page is logged as the bytes that changed and dirties no other page.
ALTER TABLE ductline_jobs SET (fillfactor = 70);
