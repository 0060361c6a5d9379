-- 0011: events (ductline.engine.events). A step that waits for an event
-- (`.wait_for(event, before=step)`) is a job with status 'deferred' naming the event
-- it waits for (wait_event), with its expiry in pause_expires_ms: one row, no slot.
-- An event sent to a run is a row of ductline_events, kept until a wait consumes it
-- (job_id, consumed_ms); a send with a key is stored once per run and key.
ALTER TABLE ductline_jobs ADD COLUMN wait_event TEXT;
CREATE INDEX ductline_jobs_deferred ON ductline_jobs (pause_expires_ms) WHERE status = 'deferred';
CREATE INDEX ductline_jobs_awaiting ON ductline_jobs (run_id, wait_event) WHERE status = 'deferred';
CREATE TABLE ductline_events (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    key TEXT,
    data TEXT NOT NULL,
    sent_ms INTEGER NOT NULL,
    job_id TEXT,
    consumed_ms INTEGER
);
CREATE UNIQUE INDEX ductline_events_key ON ductline_events (run_id, key) WHERE key IS NOT NULL;
-- seq: the run's events in the order they were sent (sends to a run take its lock in turn).
CREATE UNIQUE INDEX ductline_events_order ON ductline_events (run_id, seq);
