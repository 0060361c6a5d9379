-- Child runs (ductline.children): a step run that started child runs waits for them
-- in one row, status 'awaiting' (no lease, no slot); the child runs name it as their
-- parent_job_id. The statements both dialects run as written; each dialect's
-- child_queries.sql holds the others.

-- name: await_children
-- Fenced on the lease, as completing the job is: the attempt succeeded in starting
-- child runs. The job keeps what it started (the step's output) until it is woken.
UPDATE ductline_jobs
SET status = 'awaiting', output = :output, lease_token = NULL, lease_expires_ms = NULL, worker_id = NULL
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'
  AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = ductline_jobs.run_id
                 AND r.status IN ({UNFINISHED_RUN}));

-- name: insert_child_run
-- The id is derived from (parent job, index): a child inserted already (the parent's
-- step returned its children again after a retry) is left as is, and nothing returns.
INSERT INTO ductline_runs (id, pipeline, status, args, timeout_seconds, not_before_ms, created_ms, priority,
                           definition, parent_run_id, parent_job_id, child_index)
VALUES (:id, :pipeline, 'pending', :args, :timeout_seconds, ductline_now_ms() + :delay_ms, ductline_now_ms(), :priority,
        :definition, :parent_run_id, :parent_job_id, :child_index)
ON CONFLICT (id) DO NOTHING
RETURNING id;

-- name: children_of_job
-- An awaiting job's children in order, with what its wake-up needs of each.
SELECT id, pipeline, status, output, halt_reason, metadata FROM ductline_runs
WHERE parent_job_id = :job_id
ORDER BY child_index;

-- name: complete_awaiting
UPDATE ductline_jobs SET status = 'completed', output = :output, finished_ms = ductline_now_ms()
WHERE id = :job_id AND status = 'awaiting';

-- name: fail_awaiting
-- A child did not complete (on_failure="fail"): why is kept with the job, as an
-- expired pause's is.
UPDATE ductline_jobs SET status = 'failed', skip_reason = :reason, output = NULL, finished_ms = ductline_now_ms()
WHERE id = :job_id AND status = 'awaiting';

-- name: wakeable_awaiting
-- Awaiting jobs none of whose children is still active (ductline_jobs_awaiting_children and
-- ductline_runs_parent_job): their wake-up was left to a process that knows their
-- pipeline.
SELECT j.id, j.run_id, j.pipeline FROM ductline_jobs j
WHERE j.status = 'awaiting'
  AND NOT EXISTS (SELECT 1 FROM ductline_runs c WHERE c.parent_job_id = j.id AND c.status IN ({ACTIVE_RUN}))
ORDER BY j.created_ms
LIMIT :limit;

-- name: orphaned_children
-- Unfinished child runs whose parent run was stopped (cancelled, failed by its
-- deadline or an expired pause): the stop reaches them (ductline_runs_children_open).
SELECT c.id, c.pipeline FROM ductline_runs c
JOIN ductline_runs p ON p.id = c.parent_run_id
WHERE c.parent_run_id IS NOT NULL AND c.status IN ({UNFINISHED_RUN}) AND p.status IN ({STOPPED_RUN})
ORDER BY c.created_ms
LIMIT :limit;

-- name: child_runs
-- A run's children (and their parent job's step), in the order they were started.
SELECT r.id, r.pipeline, r.status, r.created_ms, r.finished_ms, r.child_index, j.step AS parent_step
FROM ductline_runs r LEFT JOIN ductline_jobs j ON j.id = r.parent_job_id
WHERE r.parent_run_id = :run_id
ORDER BY r.created_ms, r.child_index, r.id
LIMIT :limit;

-- name: parent_of_run
SELECT r.parent_run_id, r.parent_job_id, r.child_index, p.pipeline AS parent_pipeline, j.step AS parent_step
FROM ductline_runs r
LEFT JOIN ductline_runs p ON p.id = r.parent_run_id
LEFT JOIN ductline_jobs j ON j.id = r.parent_job_id
WHERE r.id = :run_id AND r.parent_run_id IS NOT NULL;

-- name: metrics_child_counts
-- The gauges ductline.jobs.awaiting (waiting parents, ductline_jobs_awaiting_children) and
-- ductline.runs.children (child runs not yet ended, ductline_runs_children_open), per
-- pipeline, in one read.
SELECT pipeline, 'awaiting' AS kind, count(*) AS n FROM ductline_jobs WHERE status = 'awaiting' GROUP BY pipeline
UNION ALL
SELECT pipeline, 'children' AS kind, count(*) AS n FROM ductline_runs
WHERE parent_run_id IS NOT NULL AND status IN ({ACTIVE_RUN})
GROUP BY pipeline
ORDER BY 1, 2;
