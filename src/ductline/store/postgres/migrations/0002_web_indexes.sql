-- 0002: indexes for the dashboard's run listing (keyset pagination newest first by
-- (created_ms, id), optionally filtered by pipeline and status).
CREATE INDEX ductline_runs_pipeline ON ductline_runs (pipeline, created_ms, id);
CREATE INDEX ductline_runs_pipeline_status ON ductline_runs (pipeline, status, created_ms, id);
