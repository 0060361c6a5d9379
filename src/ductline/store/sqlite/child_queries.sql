-- Child runs: SQLite's own statements (shared/child_queries.sql has the rest).

-- name: parents_of_runs
-- The parents (run, awaiting job) of the runs that just ended, if any is a child.
SELECT DISTINCT parent_run_id, parent_job_id FROM ductline_runs
WHERE id IN (SELECT value FROM json_each(:run_ids)) AND parent_job_id IS NOT NULL
ORDER BY parent_run_id, parent_job_id;

-- name: lock_awaiting
-- SQLite's write transactions are serialized already (BEGIN IMMEDIATE): the job is
-- read as it is.
SELECT id, run_id, pipeline, step, scope, output FROM ductline_jobs WHERE id = :job_id AND status = 'awaiting';

-- name: list_child_runs
-- ductline runs --parent RUN: a run's children, newest first (ductline_runs_parent).
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms, definition
FROM ductline_runs
WHERE parent_run_id = :parent AND (:status IS NULL OR status = :status) AND (:pipeline IS NULL OR pipeline = :pipeline)
ORDER BY created_ms DESC, id DESC
LIMIT :limit;
