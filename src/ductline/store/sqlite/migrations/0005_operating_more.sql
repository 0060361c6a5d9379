-- 0005: operating features, second part (issue 8).

-- Priorities: a run's priority (pipeline default or trigger override) plus its step's
-- priority is the job's; claims take higher first, then the oldest not-before.
ALTER TABLE ductline_runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ductline_jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
-- Concurrency and rate limits: a limited job carries its limit key ("pipeline:step" or
-- "pipeline:step:<key from input>"). A pending job that found its key at capacity is
-- throttled (throttled = 1) and leaves the ready index until a slot frees, so blocked
-- jobs are neither rescanned by every claim nor a reason for a worker to wake.
ALTER TABLE ductline_jobs ADD COLUMN limit_key TEXT;
ALTER TABLE ductline_jobs ADD COLUMN throttled INTEGER NOT NULL DEFAULT 0;
-- Pause for a human: a paused job waits (status 'paused') until resumed, or until
-- pause_expires_ms when the pause has a timeout.
ALTER TABLE ductline_jobs ADD COLUMN pause_expires_ms INTEGER;
DROP INDEX ductline_jobs_ready;
CREATE INDEX ductline_jobs_ready ON ductline_jobs (not_before_ms) WHERE status = 'pending' AND throttled = 0;
CREATE INDEX ductline_jobs_ready_priority ON ductline_jobs (priority, not_before_ms)
    WHERE status = 'pending' AND throttled = 0;
CREATE INDEX ductline_jobs_limited ON ductline_jobs (limit_key) WHERE status = 'running' AND limit_key IS NOT NULL;
CREATE INDEX ductline_jobs_throttled ON ductline_jobs (limit_key, priority, not_before_ms) WHERE throttled = 1;
CREATE INDEX ductline_jobs_paused ON ductline_jobs (pause_expires_ms) WHERE status = 'paused';

-- One token bucket per rate-limited key, read and written under the key's lock.
CREATE TABLE ductline_rate_buckets (
    limit_key TEXT PRIMARY KEY,
    tokens REAL NOT NULL,
    refreshed_ms INTEGER NOT NULL
);

-- Schedules: one row per schedule; the worker that moves next_fire_ms forward (a
-- compare-and-set in the transaction that inserts the run) owns that tick.
-- enabled is the operator's switch (ductline schedules disable/enable); defined is 0
-- while the code of the workers serving the pipeline no longer declares it.
CREATE TABLE ductline_schedules (
    name TEXT PRIMARY KEY,
    pipeline TEXT NOT NULL,
    cron TEXT NOT NULL,
    args TEXT NOT NULL,
    enabled INTEGER NOT NULL DEFAULT 1,
    defined INTEGER NOT NULL DEFAULT 1,
    next_fire_ms INTEGER NOT NULL,
    last_fire_ms INTEGER,
    last_run_id TEXT,
    updated_ms INTEGER NOT NULL
);
CREATE INDEX ductline_schedules_due ON ductline_schedules (next_fire_ms) WHERE enabled = 1;

-- Large payloads: values above the inline limit are stored out of line in chunks and
-- referenced from the job's input or output.
CREATE TABLE ductline_payloads (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    size INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE INDEX ductline_payloads_run ON ductline_payloads (run_id);
CREATE TABLE ductline_payload_chunks (
    payload_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (payload_id, seq)
);
