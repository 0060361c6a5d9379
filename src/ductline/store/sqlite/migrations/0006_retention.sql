-- 0006: runs are found by status and age (finish time, or creation time for one that
-- has not finished), so pruning old history reads only what it deletes.
CREATE INDEX ductline_runs_ended ON ductline_runs (status, (coalesce(finished_ms, created_ms)), id);
