-- Operator actions on step runs (ductline.engine.mark), both dialects.

-- name: mark_job_succeeded
-- A step run an operator marks succeeded: completed with the given output, without an
-- attempt. Only from a state that may be marked ({MARKABLE_JOB}): never a step run that
-- is running, completed, skipped or waiting (0 rows: it changed meanwhile).
UPDATE ductline_jobs
SET status = 'completed', output = :output, lease_token = NULL, lease_expires_ms = NULL, throttled = 0,
    skip_reason = NULL, skip_root = NULL, finished_ms = ductline_now_ms()
WHERE id = :job_id AND status IN ({MARKABLE_JOB});

-- name: insert_operator_action
INSERT INTO ductline_operator_actions (id, run_id, job_id, step, scope, action, actor, reason, previous_status,
                                       output, at_ms)
VALUES (:id, :run_id, :job_id, :step, :scope, :action, :actor, :reason, :previous_status, :output,
        ductline_now_ms());

-- name: run_operator_actions
SELECT id, job_id, step, scope, action, actor, reason, previous_status, output, at_ms
FROM ductline_operator_actions WHERE run_id = :run_id ORDER BY at_ms, id;

