-- 0005: operating features, second part.

-- Priorities: a run's priority (pipeline default or trigger override) plus its step's
-- priority is the job's; claims take higher first, then the oldest not-before.
ALTER TABLE ductline_runs ADD COLUMN priority BIGINT NOT NULL DEFAULT 0;
ALTER TABLE ductline_jobs ADD COLUMN priority BIGINT NOT NULL DEFAULT 0;
-- Concurrency and rate limits: a limited job carries its limit key ("pipeline:step" or
-- "pipeline:step:<key from input>"). A pending job that found its key at capacity is
-- throttled (throttled = 1) and leaves the ready index until a slot frees, so blocked
-- jobs are neither rescanned by every claim nor a reason for a worker to wake.
ALTER TABLE ductline_jobs ADD COLUMN limit_key TEXT;
ALTER TABLE ductline_jobs ADD COLUMN throttled BIGINT NOT NULL DEFAULT 0;
-- Pause for a human: a paused job waits (status 'paused') until resumed, or until
-- pause_expires_ms when the pause has a timeout.
ALTER TABLE ductline_jobs ADD COLUMN pause_expires_ms BIGINT;
ALTER TABLE ductline_jobs ADD COLUMN rate_slot_ms BIGINT;
DROP INDEX ductline_jobs_ready;
-- The ready index: claims (highest priority first, then oldest) and the wake-up
-- timer read only this, one priority level at a time (ductline_ready_levels).
CREATE INDEX ductline_jobs_ready ON ductline_jobs (priority, not_before_ms) WHERE status = 'pending' AND throttled = 0;
-- The distinct priorities of claimable jobs, highest first: a recursive walk down the
-- ready index, one index lookup per level. Claims and timers read each level's jobs
-- from the same index in not-before order, so delayed jobs are never scanned.
CREATE VIEW ductline_ready_levels AS
WITH RECURSIVE levels(priority) AS (
    SELECT (SELECT priority FROM ductline_jobs WHERE status = 'pending' AND throttled = 0
            ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM ductline_jobs j
            WHERE j.status = 'pending' AND j.throttled = 0 AND j.priority < levels.priority
            ORDER BY j.priority DESC LIMIT 1)
    FROM levels WHERE levels.priority IS NOT NULL
)
SELECT priority FROM levels WHERE priority IS NOT NULL;
-- A limited job holds a slot of its key while it has a lease: running, or ended by a
-- cancel or deadline while its worker may still be killing the attempt (the worker
-- releases the slot once the attempt is gone, else the lease runs out).
CREATE INDEX ductline_jobs_limited ON ductline_jobs (limit_key)
    WHERE limit_key IS NOT NULL AND lease_expires_ms IS NOT NULL;
-- Start slots held by rate-limited jobs waiting for them.
CREATE INDEX ductline_jobs_rate_slots ON ductline_jobs (limit_key, rate_slot_ms)
    WHERE status = 'pending' AND rate_slot_ms IS NOT NULL;
CREATE INDEX ductline_jobs_throttled ON ductline_jobs (limit_key, priority, not_before_ms)
    WHERE throttled = 1 AND status = 'pending';
CREATE INDEX ductline_jobs_paused ON ductline_jobs (pause_expires_ms) WHERE status = 'paused';

-- Rate limits hand out start slots 1/rate apart (a generic cell rate algorithm). A job
-- that must wait gets its slot as not-before (rate_slot_ms) and keeps it; the next
-- free slot follows the last slot held by a pending job, so slots of jobs that were
-- cancelled are given out again. One row per key keeps the last start, read and
-- written under the key's lock: two starts are never closer than 1/rate, even when
-- slots were missed.
CREATE TABLE ductline_rate_slots (
    limit_key TEXT PRIMARY KEY,
    last_start_ms DOUBLE PRECISION NOT NULL
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
    enabled BIGINT NOT NULL DEFAULT 1,
    defined BIGINT NOT NULL DEFAULT 1,
    next_fire_ms BIGINT NOT NULL,
    last_fire_ms BIGINT,
    last_run_id TEXT,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX ductline_schedules_due ON ductline_schedules (next_fire_ms) WHERE enabled = 1;

-- Large payloads: values above the inline limit are stored out of line in chunks and
-- referenced from the job's input or output.
CREATE TABLE ductline_payloads (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    size BIGINT NOT NULL,
    chunks BIGINT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX ductline_payloads_run ON ductline_payloads (run_id);
CREATE TABLE ductline_payload_chunks (
    payload_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (payload_id, seq)
);
