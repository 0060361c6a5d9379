-- 0017: indexes a trigger does not write. A new run has no deadline yet (it starts
-- counting at the first attempt) and its first job is no element of an expand, so
-- neither is entered in these indexes any more: a trigger writes two index entries
-- fewer, a run's start and end rewrite one fewer.
-- Run deadlines: only runs that have one, among every unfinished status -- the
-- statuses the deadline queries (due_deadlines, next_wakeups) name, so that they read
-- this index (with the statuses pending and running only, they could not: they
-- scanned every unfinished run).
DROP INDEX ductline_runs_deadline;
CREATE INDEX ductline_runs_deadline ON ductline_runs (deadline_ms)
    WHERE deadline_ms IS NOT NULL AND status IN ('pending', 'running', 'paused', 'halted');
-- The elements of an expand, in order (gather_elements): only jobs that are elements
-- (an element has a parent scope; parent_scope = :parent_scope implies it).
DROP INDEX ductline_jobs_elements;
CREATE INDEX ductline_jobs_elements ON ductline_jobs (run_id, step, parent_scope, elem_index)
    WHERE parent_scope IS NOT NULL;
