-- 0013: what operators did to a run's steps, for its history (ductline.engine.mark):
-- one row per action, written in the transaction that applies it; deleted with the run.
-- action 'mark_succeeded': the step run was recorded completed with the operator's
-- output, without running it.
CREATE TABLE ductline_operator_actions (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    job_id TEXT NOT NULL,
    step TEXT NOT NULL,
    scope TEXT NOT NULL,
    action TEXT NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT,
    previous_status TEXT NOT NULL,
    output TEXT NOT NULL,
    at_ms BIGINT NOT NULL
);
CREATE INDEX ductline_operator_actions_run ON ductline_operator_actions (run_id, at_ms);
