-- ductline schema for SQLite. Times are integer milliseconds since the Unix epoch,
-- read from the database clock (julianday('now')). Payloads are JSON text.
CREATE TABLE ductline_schema_version (
    version INTEGER NOT NULL
);

CREATE TABLE ductline_runs (
    id TEXT PRIMARY KEY,
    pipeline TEXT NOT NULL,
    status TEXT NOT NULL,
    args TEXT NOT NULL,
    output TEXT,
    halt_reason TEXT,
    metadata TEXT NOT NULL DEFAULT '{}',
    timeout_seconds INTEGER,
    deadline_ms INTEGER,
    not_before_ms INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    started_ms INTEGER,
    finished_ms INTEGER
, idempotency_key TEXT, priority INTEGER NOT NULL DEFAULT 0, definition TEXT NOT NULL DEFAULT '', parent_run_id TEXT, parent_job_id TEXT, child_index INTEGER);
CREATE INDEX ductline_runs_listing ON ductline_runs (created_ms);
CREATE INDEX ductline_runs_status ON ductline_runs (status, created_ms);
-- Workers set a timer to the earliest run deadline they know of: ductline_runs_deadline (0017).

CREATE TABLE ductline_jobs (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES ductline_runs (id),
    pipeline TEXT NOT NULL,
    step TEXT NOT NULL,
    scope TEXT NOT NULL,
    parent_scope TEXT,
    elem_index INTEGER,
    status TEXT NOT NULL,
    input TEXT NOT NULL,
    output TEXT,
    not_before_ms INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    crashes INTEGER NOT NULL DEFAULT 0,
    max_retry INTEGER NOT NULL,
    max_crash INTEGER NOT NULL,
    retry_delay_seconds INTEGER NOT NULL,
    timeout_seconds INTEGER,
    lease_token TEXT,
    lease_expires_ms INTEGER,
    worker_id TEXT,
    boundary TEXT,
    skip_reason TEXT,
    skip_root TEXT,
    created_ms INTEGER NOT NULL,
    finished_ms INTEGER
, priority INTEGER NOT NULL DEFAULT 0, limit_key TEXT, throttled INTEGER NOT NULL DEFAULT 0, pause_expires_ms INTEGER, rate_slot_ms INTEGER, phase INTEGER NOT NULL DEFAULT 0, wait_event TEXT, releases INTEGER NOT NULL DEFAULT 0, queue TEXT NOT NULL DEFAULT 'default', definition TEXT NOT NULL DEFAULT '');
-- A step run exists once per (run, step, scope): creating it twice is impossible.
CREATE UNIQUE INDEX ductline_jobs_identity ON ductline_jobs (run_id, step, scope);
CREATE INDEX ductline_jobs_leases ON ductline_jobs (lease_expires_ms) WHERE status = 'running';
-- The elements of an expand, in order: ductline_jobs_elements (0017).

CREATE TABLE ductline_attempts (
    job_id TEXT NOT NULL REFERENCES ductline_jobs (id),
    attempt INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    lease_token TEXT NOT NULL,
    worker_id TEXT,
    result TEXT,
    started_ms INTEGER NOT NULL,
    deadline_ms INTEGER,
    finished_ms INTEGER,
    error_type TEXT,
    error TEXT,
    traceback TEXT,
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX ductline_attempts_run ON ductline_attempts (run_id);

CREATE TABLE ductline_fanins (
    run_id TEXT NOT NULL,
    step TEXT NOT NULL,
    scope TEXT NOT NULL,
    expected INTEGER NOT NULL,
    arrived INTEGER NOT NULL,
    PRIMARY KEY (run_id, step, scope)
);

CREATE TABLE ductline_context (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);

CREATE TABLE ductline_workers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    concurrency INTEGER NOT NULL,
    busy INTEGER NOT NULL DEFAULT 0,
    undead INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,
    started_ms INTEGER NOT NULL,
    heartbeat_ms INTEGER NOT NULL
, queues TEXT NOT NULL DEFAULT '["default"]', definitions TEXT NOT NULL DEFAULT '[]', problem TEXT);

-- 0002: indexes for the dashboard's run listing (keyset pagination newest first by
-- (created_ms, id), optionally filtered by pipeline and status).
CREATE INDEX ductline_runs_pipeline ON ductline_runs (pipeline, created_ms, id);
CREATE INDEX ductline_runs_pipeline_status ON ductline_runs (pipeline, status, created_ms, id);

-- 0003: operating features.
-- Idempotency: trigger(..., key=...) stores the key on the run. At most one *active*
-- run (pending, running, paused or halted: a halted run may still be retried) holds
-- a key per pipeline; a completed, failed or cancelled run releases it, so the same
-- key can start a new run later. The unique partial index is the arbiter between
-- racing triggers (INSERT ... ON CONFLICT DO NOTHING), not a read-then-write.
-- (ductline_runs.idempotency_key is added by this migration.)
CREATE UNIQUE INDEX ductline_runs_idempotency ON ductline_runs (pipeline, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND status IN ('pending', 'running', 'paused', 'halted');

-- Attempts still open: found by the primary key (0018).

-- 0005: operating features, second part; columns are in the tables above.
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
    last_start_ms REAL NOT NULL
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

-- 0006: retention (prune finished runs by finish time).
CREATE INDEX ductline_runs_ended ON ductline_runs (status, (coalesce(finished_ms, created_ms)), id);

-- 0007: step logs: what steps log, per attempt (ductline.execution.steplog), in order of seq;
-- deleted with their run (prune_step_logs).
CREATE TABLE ductline_step_logs (
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    level TEXT NOT NULL,
    logger TEXT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (job_id, attempt, seq)
);
CREATE INDEX ductline_step_logs_run ON ductline_step_logs (run_id);

-- 0008: started runs first: at equal priority a claim takes the jobs of runs already
-- under way (phase 0) before the first step of a run (phase 1; ductline.model.claim_order).

-- 0009: run tags (ductline.model.tags): labels a run carries, written with the run,
-- deleted with it (prune_tags). Runs are found by tag through the (key, value) index;
-- the run id in it answers the lookup from the index alone.
CREATE TABLE ductline_run_tags (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE INDEX ductline_run_tags_lookup ON ductline_run_tags (key, value, run_id);

-- 0010: the ticks of schedules that have a run: one row per (schedule, tick), written in
-- the transaction that inserts the tick's run, by the worker firing it (with catch-up)
-- or by a backfill. The primary key is the arbiter: a tick is claimed once, also by
-- racing backfills and workers (INSERT ... ON CONFLICT DO NOTHING), and stays claimed
-- after its run ended, so a repeated backfill starts nothing again.
CREATE TABLE ductline_schedule_ticks (
    schedule TEXT NOT NULL,
    tick_ms INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (schedule, tick_ms)
);

-- 0011: events (ductline.engine.events): a job waiting for an event is 'deferred'
-- (wait_event names the event, pause_expires_ms is its expiry); an event sent to a
-- run is kept in ductline_events until a wait consumes it (job_id, consumed_ms).
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
-- 0012: ductline_jobs.releases (in the table above): a job's consecutive releases at a
-- worker's shutdown grace; the run halts at ductline.model.outcomes.MAX_RELEASES.

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
    at_ms INTEGER NOT NULL
);
CREATE INDEX ductline_operator_actions_run ON ductline_operator_actions (run_id, at_ms);

-- 0014: queues and definition versions (columns are in the tables above).
CREATE TABLE ductline_definitions (
    fingerprint TEXT PRIMARY KEY,
    pipeline TEXT NOT NULL,
    steps TEXT NOT NULL,
    queues TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
-- The ready index: claims (per queue: highest priority first, then phase, then oldest)
-- and the wake-up timer read only this, one (queue, priority, phase) range at a time.
CREATE INDEX ductline_jobs_ready ON ductline_jobs (queue, priority, phase, not_before_ms)
    WHERE status = 'pending' AND throttled = 0;
-- Runs by definition: `ductline runs --version` and `ductline runs move`.
CREATE INDEX ductline_runs_definition ON ductline_runs (definition, created_ms);
-- The queues of claimable jobs, as (queue, priority, phase) in no particular order:
-- a recursive walk down the ready index, first over its distinct queue names, then
-- over each queue's priority levels -- one index lookup per name and per level,
-- however many jobs wait -- with each phase. Each of them is read in not-before
-- order from the ready index, so delayed jobs are never scanned and the jobs of a
-- queue a worker does not serve are never read.
CREATE VIEW ductline_ready_queues AS
WITH RECURSIVE names(queue) AS (
    SELECT (SELECT queue FROM ductline_jobs WHERE status = 'pending' AND throttled = 0
            ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM ductline_jobs j
            WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue > names.queue
            ORDER BY j.queue LIMIT 1)
    FROM names WHERE names.queue IS NOT NULL
), levels(queue, priority) AS (
    SELECT names.queue, (SELECT j.priority FROM ductline_jobs j
                         WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = names.queue
                         ORDER BY j.priority DESC LIMIT 1)
    FROM names WHERE names.queue IS NOT NULL
    UNION ALL
    SELECT levels.queue, (SELECT j.priority FROM ductline_jobs j
                          WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = levels.queue
                            AND j.priority < levels.priority
                          ORDER BY j.priority DESC LIMIT 1)
    FROM levels WHERE levels.priority IS NOT NULL
)
SELECT levels.queue, levels.priority, phases.phase
FROM levels CROSS JOIN (SELECT 0 AS phase UNION ALL SELECT 1) AS phases
WHERE levels.priority IS NOT NULL;

-- 0016: child runs. A step that returns ductline.children([...]) starts runs of other
-- pipelines; each child run names its parent run, the parent's job (the step run that
-- awaits it) and its index among that job's children. A child run's id is derived
-- from (parent job, index) (ductline.model.children.child_run_id), so it is inserted
-- once however often the parent's step returns its children.
-- A parent's children, newest first (ductline runs --parent, the run page's tree, a
-- stop of the parent that cancels them).
CREATE INDEX ductline_runs_parent ON ductline_runs (parent_run_id, created_ms, id) WHERE parent_run_id IS NOT NULL;
-- Unfinished children (a stop of their parent reaches them: orphaned_children).
CREATE INDEX ductline_runs_children_open ON ductline_runs (parent_run_id)
    WHERE parent_run_id IS NOT NULL AND status IN ('pending', 'running', 'paused', 'halted');
-- An awaiting job's children in order (its wake-up reads them).
CREATE INDEX ductline_runs_parent_job ON ductline_runs (parent_job_id, child_index) WHERE parent_job_id IS NOT NULL;
-- Awaiting jobs (the sweep that wakes those whose children ended while no process
-- that knows the parent's pipeline recorded their end).
CREATE INDEX ductline_jobs_awaiting_children ON ductline_jobs (created_ms) WHERE status = 'awaiting';

-- 0017: indexes a trigger does not write (a new run has no deadline yet, its first job
-- is no element of an expand).
-- Run deadlines: only runs that have one, among every unfinished status -- the
-- statuses the deadline queries (due_deadlines, next_wakeups) name, so that they read
-- this index.
CREATE INDEX ductline_runs_deadline ON ductline_runs (deadline_ms)
    WHERE deadline_ms IS NOT NULL AND status IN ('pending', 'running', 'paused', 'halted');
-- The elements of an expand, in order: ductline_jobs_elements (0018).

-- 0018: fewer index entries written per job.
-- The elements of an expand, in order (gather_elements): completed elements only (an
-- element has a parent scope; parent_scope = :parent_scope implies it). An element's
-- insert and its claim write no entry here.
CREATE INDEX ductline_jobs_elements ON ductline_jobs (run_id, step, parent_scope, elem_index)
    WHERE parent_scope IS NOT NULL AND status = 'completed';
