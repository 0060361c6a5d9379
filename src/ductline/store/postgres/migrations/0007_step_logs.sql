-- 0007: what steps log, per attempt (ductline.execution.steplog), in order of seq;
-- deleted with their run (prune_step_logs).
CREATE TABLE ductline_step_logs (
    job_id TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    level TEXT NOT NULL,
    logger TEXT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (job_id, attempt, seq)
);
CREATE INDEX ductline_step_logs_run ON ductline_step_logs (run_id);
