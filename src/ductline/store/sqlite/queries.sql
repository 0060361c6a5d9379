-- Named statements for SQLite. ductline_now_ms() is the database clock; the loader
-- expands it to SQLite's own millisecond time (julianday('now'), read per statement).

-- name: schema_version
SELECT max(version) AS version FROM ductline_schema_version;

-- name: set_schema_version
INSERT INTO ductline_schema_version (version) VALUES (:version);

-- name: now
SELECT ductline_now_ms() AS now_ms;

-- name: insert_run
-- A second trigger with the key of an active run inserts nothing (0 rows): the
-- partial unique index ductline_runs_idempotency decides, also between racing triggers.
INSERT INTO ductline_runs (id, pipeline, status, args, timeout_seconds, not_before_ms, created_ms,
                           idempotency_key, priority)
VALUES (:id, :pipeline, 'pending', :args, :timeout_seconds,
        coalesce(:not_before_ms, ductline_now_ms() + :delay_ms), ductline_now_ms(), :idempotency_key, :priority)
ON CONFLICT (pipeline, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND status IN ('pending', 'running', 'paused', 'halted')
DO NOTHING;

-- name: active_run_by_key
SELECT id FROM ductline_runs
WHERE pipeline = :pipeline AND idempotency_key = :idempotency_key
  AND status IN ('pending', 'running', 'paused', 'halted');

-- name: insert_job
-- The not-before time is read from the clock when this statement runs, inside the
-- transaction that records the previous step's completion, i.e. just before commit.
INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input,
                           not_before_ms, max_retry, max_crash, retry_delay_seconds, timeout_seconds, created_ms,
                           priority, limit_key, phase)
VALUES (:id, :run_id, :pipeline, :step, :scope, :parent_scope, :elem_index,
        CASE WHEN :status <> 'auto' THEN :status
             WHEN (SELECT r.status FROM ductline_runs r WHERE r.id = :run_id) IN ('pending', 'running', 'paused') THEN 'pending'
             ELSE 'held' END,
        :input, coalesce(:not_before_ms, ductline_now_ms() + :delay_ms), :max_retry, :max_crash,
        :retry_delay_seconds, :timeout_seconds, ductline_now_ms(),
        -- a job's priority is its run's plus its step's (see Pipeline(priority=))
        coalesce((SELECT r.priority FROM ductline_runs r WHERE r.id = :run_id), 0) + :priority, :limit_key,
        -- the claim order at equal priority: a run's first step after the jobs of runs
        -- under way (ductline.model.claim_order)
        :phase)
ON CONFLICT (run_id, step, scope) DO NOTHING;

-- name: claim_jobs
-- SQLite serialises writers (BEGIN IMMEDIATE), so no row can be claimed twice.
-- One (priority, phase) queue per statement (the store walks ready_queues in claim
-- order, ductline.model.claim_order), read in not-before order from the ready index:
-- delayed jobs are never scanned.
UPDATE ductline_jobs
SET status = 'running', attempts = attempts + 1, lease_token = lower(hex(randomblob(16))),
    lease_expires_ms = ductline_now_ms() + :lease_ms, worker_id = :worker_id
WHERE id IN (
    SELECT id FROM ductline_jobs
    WHERE status = 'pending' AND throttled = 0 AND priority = :priority AND phase = :phase
      AND not_before_ms <= ductline_now_ms()
      AND pipeline IN (SELECT value FROM json_each(:pipelines))
    ORDER BY not_before_ms
    LIMIT :limit
)
RETURNING id, run_id, pipeline, step, scope, input, attempts, lease_token, timeout_seconds,
          boundary, not_before_ms, limit_key, priority, phase, ductline_now_ms() AS claimed_ms;

-- name: start_run
UPDATE ductline_runs
SET status = 'running', started_ms = :now_ms,
    deadline_ms = CASE WHEN timeout_seconds IS NULL THEN NULL ELSE :now_ms + timeout_seconds * 1000 END
WHERE id = :run_id AND (status = 'pending' OR (status = 'running' AND started_ms > :now_ms));

-- name: run_deadline
SELECT deadline_ms FROM ductline_runs WHERE id = :run_id;

-- name: insert_attempt
INSERT INTO ductline_attempts (job_id, attempt, run_id, lease_token, worker_id, started_ms, deadline_ms)
VALUES (:job_id, :attempt, :run_id, :lease_token, :worker_id, :started_ms, :deadline_ms);

-- name: renew_leases
UPDATE ductline_jobs SET lease_expires_ms = ductline_now_ms() + :lease_ms
-- An expired lease is never renewed: rescuers may already have taken it.
-- A lease in a run that ended (cancelled, failed) is lost: its worker kills the attempt.
WHERE status = 'running' AND lease_expires_ms >= ductline_now_ms() AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = ductline_jobs.run_id
                 AND r.status IN ('pending', 'running', 'paused', 'halted'))
  AND lease_token IN (SELECT value FROM json_each(:tokens))
RETURNING lease_token;

-- name: leases_held
-- renew_leases' test without the write: which of these leases a renewal would keep.
SELECT lease_token FROM ductline_jobs
WHERE status = 'running' AND lease_expires_ms >= ductline_now_ms() AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = ductline_jobs.run_id
                 AND r.status IN ('pending', 'running', 'paused', 'halted'))
  AND lease_token IN (SELECT value FROM json_each(:tokens));

-- name: complete_job
UPDATE ductline_jobs
SET status = 'completed', output = :output, lease_token = NULL, lease_expires_ms = NULL,
    finished_ms = ductline_now_ms()
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'
  AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = ductline_jobs.run_id
                 AND r.status IN ('pending', 'running', 'paused', 'halted'));

-- name: retry_job
-- A job re-queued while its run is halted is held, so nothing new starts until a retry.
UPDATE ductline_jobs
SET status = CASE WHEN (SELECT r.status FROM ductline_runs r WHERE r.id = ductline_jobs.run_id) IN ('pending', 'running', 'paused')
                  THEN 'pending' ELSE 'held' END, failures = failures + :failed, crashes = crashes + :crashed,
    not_before_ms = ductline_now_ms() + :delay_ms, lease_token = NULL, lease_expires_ms = NULL,
    worker_id = NULL
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running';

-- name: fail_job
UPDATE ductline_jobs
SET status = 'failed', failures = failures + :failed, crashes = crashes + :crashed,
    lease_token = NULL, lease_expires_ms = NULL, finished_ms = ductline_now_ms()
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running';

-- name: close_attempt
-- started_ms: when the attempt really began, if later than its claim (a job claimed
-- ahead waited in its worker's queue); never before the claim; NULL keeps it. With a
-- later start comes the deadline the attempt ran under (its timeout counted from it).
UPDATE ductline_attempts
SET result = :result, finished_ms = ductline_now_ms(), error_type = :error_type, error = :error,
    traceback = :traceback, started_ms = MAX(started_ms, COALESCE(:started_ms, started_ms)),
    deadline_ms = CASE WHEN :started_ms > started_ms THEN :deadline_ms ELSE deadline_ms END
WHERE job_id = :job_id AND attempt = :attempt AND lease_token = :lease_token AND result IS NULL;

-- name: job_budget
SELECT failures, crashes, max_retry, max_crash, retry_delay_seconds, boundary, run_id, step, pipeline,
       status, lease_token
FROM ductline_jobs WHERE id = :job_id;

-- name: mark_boundary
UPDATE ductline_jobs SET boundary = :boundary
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running';

-- name: run_state
SELECT status FROM ductline_runs WHERE id = :run_id;

-- name: halt_run
UPDATE ductline_runs
SET status = 'halted', halt_reason = :reason, metadata = :metadata, finished_ms = ductline_now_ms()
WHERE id = :run_id AND status IN ('pending', 'running', 'paused');

-- name: hold_jobs
UPDATE ductline_jobs SET status = 'held' WHERE run_id = :run_id AND status = 'pending';

-- name: complete_run
UPDATE ductline_runs SET status = 'completed', output = :output, finished_ms = ductline_now_ms()
WHERE id = :run_id AND status = 'running';

-- name: create_fanin
INSERT INTO ductline_fanins (run_id, step, scope, expected, arrived)
VALUES (:run_id, :step, :scope, :expected, 0)
ON CONFLICT (run_id, step, scope) DO NOTHING;

-- name: arrive_fanins
-- One row per fan-in, bumped in the completing transaction by the number of arrivals
-- the batch brings (:items, one per fan-in, in key order): deciding that the last
-- branch arrived costs O(1), never a scan of the siblings.
INSERT INTO ductline_fanins (run_id, step, scope, expected, arrived)
SELECT x.run_id, x.step, x.scope, x.expected, x.n
FROM (SELECT json_extract(value, '$.run_id') AS run_id, json_extract(value, '$.step') AS step,
             json_extract(value, '$.scope') AS scope, json_extract(value, '$.expected') AS expected,
             json_extract(value, '$.n') AS n
      FROM json_each(:items) ORDER BY key) AS x
WHERE true
ON CONFLICT (run_id, step, scope) DO UPDATE SET arrived = ductline_fanins.arrived + excluded.arrived
RETURNING run_id, step, scope, arrived, expected;

-- name: gather_elements
SELECT elem_index, output FROM ductline_jobs
WHERE run_id = :run_id AND step = :step AND parent_scope = :parent_scope AND status = 'completed'
ORDER BY elem_index;

-- name: gather_branches
SELECT step, output FROM ductline_jobs
WHERE run_id = :run_id AND scope = :scope AND status = 'completed'
  AND step IN (SELECT value FROM json_each(:steps));

-- name: expired_leases
SELECT id, run_id, pipeline, step, scope, attempts, lease_token FROM ductline_jobs
WHERE status = 'running' AND lease_expires_ms < ductline_now_ms()
ORDER BY lease_expires_ms
LIMIT :limit;

-- name: release_job
UPDATE ductline_jobs
SET status = CASE WHEN (SELECT r.status FROM ductline_runs r WHERE r.id = ductline_jobs.run_id) IN ('pending', 'running', 'paused')
                  THEN 'pending' ELSE 'held' END, not_before_ms = ductline_now_ms(), lease_token = NULL, lease_expires_ms = NULL,
    worker_id = NULL
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running';

-- name: revive_run
-- A run halted before its first attempt started goes back to pending, so its
-- deadline still starts at its first attempt; one with a paused step, to paused.
UPDATE ductline_runs
SET status = CASE WHEN started_ms IS NULL THEN 'pending'
                  WHEN EXISTS (SELECT 1 FROM ductline_jobs j WHERE j.run_id = ductline_runs.id
                                 AND j.status = 'paused') THEN 'paused'
                  ELSE 'running' END, halt_reason = NULL,
    -- The halt's details go (a revived run that completes must not look halted);
    -- how many times it was revived stays.
    metadata = json_set(json_remove(metadata, '$.halted_step', '$.error', '$.reasons'), '$.revived',
                        coalesce(json_extract(metadata, '$.revived'), 0) + 1),
    finished_ms = NULL
WHERE id = :run_id AND status = 'halted';

-- name: revive_jobs
UPDATE ductline_jobs
SET status = 'pending', failures = 0, crashes = 0, finished_ms = NULL, throttled = 0,
    -- Why it was cancelled or skipped no longer holds: it waits to run again.
    skip_reason = NULL, skip_root = NULL,
    not_before_ms = CASE WHEN not_before_ms > ductline_now_ms() THEN not_before_ms ELSE ductline_now_ms() END,
    -- A crossed boundary is cleared only for the steps an operator forced by name.
    boundary = CASE WHEN step IN (SELECT value FROM json_each(:force_steps)) THEN NULL ELSE boundary END
WHERE run_id = :run_id AND status IN ('failed', 'held', 'cancelled');

-- name: context_get
SELECT value FROM ductline_context WHERE run_id = :run_id AND key = :key;

-- name: context_insert
INSERT INTO ductline_context (run_id, key, value) VALUES (:run_id, :key, :value)
ON CONFLICT (run_id, key) DO NOTHING;

-- name: context_upsert
INSERT INTO ductline_context (run_id, key, value) VALUES (:run_id, :key, :value)
ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value;

-- name: upsert_worker
INSERT INTO ductline_workers (id, host, pid, concurrency, busy, undead, status, started_ms, heartbeat_ms)
VALUES (:id, :host, :pid, :concurrency, 0, 0, 'running', ductline_now_ms(), ductline_now_ms())
ON CONFLICT (id) DO UPDATE SET heartbeat_ms = ductline_now_ms(), status = 'running';

-- name: worker_heartbeat
UPDATE ductline_workers SET heartbeat_ms = ductline_now_ms(), busy = :busy, undead = :undead, status = :status
WHERE id = :id
RETURNING heartbeat_ms AS now_ms;

-- name: list_workers
SELECT id, host, pid, concurrency, busy, undead, status, started_ms, heartbeat_ms,
       ductline_now_ms() AS now_ms
FROM ductline_workers ORDER BY started_ms DESC LIMIT :limit;

-- name: next_not_before
-- The earliest not-before time of a claimable job: one index lookup per queue
-- (priority level and phase), however many jobs wait.
SELECT (SELECT min((SELECT j.not_before_ms FROM ductline_jobs j
                 WHERE j.status = 'pending' AND j.throttled = 0 AND j.priority = q.priority
                   AND j.phase = q.phase AND j.pipeline IN (SELECT value FROM json_each(:pipelines))
                 ORDER BY j.not_before_ms LIMIT 1))
        FROM ductline_ready_queues q) AS not_before_ms;

-- name: get_run
SELECT id, pipeline, status, args, output, halt_reason, metadata, timeout_seconds, deadline_ms,
       not_before_ms, created_ms, started_ms, finished_ms, idempotency_key, priority
FROM ductline_runs WHERE id = :run_id;

-- name: list_runs
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms
FROM ductline_runs
WHERE (:status IS NULL OR status = :status) AND (:pipeline IS NULL OR pipeline = :pipeline)
ORDER BY created_ms DESC, id DESC
LIMIT :limit;

-- name: run_jobs
SELECT id, step, scope, parent_scope, elem_index, status, output, not_before_ms, attempts, failures,
       crashes, boundary, skip_reason, skip_root, created_ms, finished_ms, pause_expires_ms, priority,
       limit_key, throttled
FROM ductline_jobs WHERE run_id = :run_id ORDER BY created_ms, coalesce(elem_index, -1), scope;

-- name: run_attempts
SELECT job_id, attempt, result, started_ms, deadline_ms, finished_ms, error_type, error, traceback, worker_id
FROM ductline_attempts WHERE run_id = :run_id ORDER BY job_id, attempt;

-- name: run_progress
SELECT status, count(*) AS n FROM ductline_jobs WHERE run_id = :run_id GROUP BY status;

-- name: lease_state
SELECT status, lease_token FROM ductline_jobs WHERE id = :job_id;

-- name: notify
-- SQLite has no LISTEN/NOTIFY: workers wake on their not-before timer and poll.
SELECT 0 AS notified;

-- name: notify_cancel
-- Workers learn of a cancel at their next heartbeat (their lease renewal fails).
SELECT 0 AS notified;

-- name: running_steps
SELECT DISTINCT step FROM ductline_jobs WHERE run_id = :run_id AND status = 'running' ORDER BY step;

-- name: open_jobs
SELECT id, step, scope, status FROM ductline_jobs
WHERE run_id = :run_id AND status IN ('pending', 'held', 'paused', 'running');

-- name: abort_running_jobs
-- A limited job keeps its lease expiry: its slot stays held until the worker that was
-- running it has killed the attempt (or the lease runs out), so the key's limit holds.
UPDATE ductline_jobs
SET status = :status, lease_token = NULL, worker_id = NULL,
    lease_expires_ms = CASE WHEN limit_key IS NULL THEN NULL ELSE lease_expires_ms END,
    finished_ms = ductline_now_ms(), skip_reason = :reason
WHERE run_id = :run_id AND status = 'running';

-- name: close_open_attempts
UPDATE ductline_attempts
SET result = :result, finished_ms = ductline_now_ms(), error_type = :error_type, error = :error
WHERE run_id = :run_id AND result IS NULL;

-- name: skip_waiting_jobs
UPDATE ductline_jobs
SET status = 'skipped', skip_reason = :reason, skip_root = :root, finished_ms = ductline_now_ms()
WHERE run_id = :run_id AND status IN ('pending', 'held', 'paused');

-- name: insert_skipped_job
-- A dependent that was never created is recorded skipped, so a run's record is whole.
INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input,
                           not_before_ms, max_retry, max_crash, retry_delay_seconds, skip_reason,
                           skip_root, created_ms, finished_ms)
VALUES (:id, :run_id, :pipeline, :step, :scope, :parent_scope, :elem_index, 'skipped', '[]',
        ductline_now_ms(), 0, 0, 0, :reason, :root, ductline_now_ms(), ductline_now_ms())
ON CONFLICT (run_id, step, scope) DO NOTHING;

-- name: due_deadlines
SELECT id, pipeline, timeout_seconds, metadata FROM ductline_runs
WHERE status IN ('pending', 'running', 'paused', 'halted') AND deadline_ms <= ductline_now_ms()
ORDER BY deadline_ms
LIMIT :limit;

-- name: run_metadata
SELECT metadata, timeout_seconds, status FROM ductline_runs WHERE id = :run_id;

-- name: set_attempt_deadline
UPDATE ductline_attempts SET deadline_ms = :deadline_ms
WHERE job_id = :job_id AND attempt = :attempt AND lease_token = :lease_token AND result IS NULL;

-- name: complete_jobs
-- Record many succeeded attempts in one statement (fenced per row by its token).
UPDATE ductline_jobs
SET status = 'completed', output = x.output, lease_token = NULL, lease_expires_ms = NULL,
    finished_ms = ductline_now_ms()
FROM (SELECT json_extract(value, '$.job_id') AS job_id, json_extract(value, '$.lease_token') AS lease_token,
              json_extract(value, '$.output') AS output FROM json_each(:items)) AS x
WHERE ductline_jobs.id = x.job_id AND ductline_jobs.lease_token = x.lease_token
  AND ductline_jobs.status = 'running'
  -- a result that arrives after its run was cancelled or failed is dropped
  AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = ductline_jobs.run_id
                 AND r.status IN ('pending', 'running', 'paused', 'halted'))
RETURNING ductline_jobs.id AS id;

-- name: close_succeeded_attempts
UPDATE ductline_attempts
SET result = 'succeeded', finished_ms = ductline_now_ms(),
    started_ms = MAX(ductline_attempts.started_ms, COALESCE(x.started_ms, ductline_attempts.started_ms)),
    deadline_ms = CASE WHEN x.started_ms > ductline_attempts.started_ms THEN x.deadline_ms
                       ELSE ductline_attempts.deadline_ms END  -- as in close_attempt
FROM (SELECT json_extract(value, '$.job_id') AS job_id, json_extract(value, '$.attempt') AS attempt,
              json_extract(value, '$.lease_token') AS lease_token,
              json_extract(value, '$.started_ms') AS started_ms,
              json_extract(value, '$.deadline_ms') AS deadline_ms FROM json_each(:items)) AS x
WHERE ductline_attempts.job_id = x.job_id AND ductline_attempts.attempt = x.attempt
  AND ductline_attempts.lease_token = x.lease_token AND ductline_attempts.result IS NULL;

-- name: start_runs
-- The earliest claim starts a run (and its deadline); a later one never moves it later.
UPDATE ductline_runs
SET status = 'running', started_ms = :now_ms,
    deadline_ms = CASE WHEN timeout_seconds IS NULL THEN NULL ELSE :now_ms + timeout_seconds * 1000 END
WHERE id IN (SELECT value FROM json_each(:run_ids)) AND (status = 'pending' OR (status = 'running' AND started_ms > :now_ms))
-- The deadlines of the runs it started; the caller reads the others (run_deadlines).
RETURNING id, deadline_ms, 0 AS stale;

-- name: restart_run_deadline
-- A run's deadline counts from its first attempt's start. A claim starts the run's
-- clock (start_runs); an attempt that waited in its worker's queue of jobs claimed
-- ahead moves it to when it really began -- only while no other attempt of the run
-- ever began (one given back unstarted did not: error_type 'Released', error starting
-- with ductline.model.outcomes.GIVEN_BACK, :given_back), so a run already under way
-- keeps its deadline.
UPDATE ductline_runs
SET started_ms = :started_ms, deadline_ms = :started_ms + timeout_seconds * 1000
WHERE id = :run_id AND status = 'running' AND timeout_seconds IS NOT NULL AND started_ms < :started_ms
  AND NOT EXISTS (SELECT 1 FROM ductline_attempts a WHERE a.run_id = :run_id
                  AND NOT (a.job_id = :job_id AND a.attempt = :attempt)
                  AND NOT (coalesce(a.error_type, '') = 'Released'
                           AND coalesce(a.error, '') LIKE :given_back))
RETURNING deadline_ms;

-- name: unstart_run
-- A job claimed ahead was given back before it started (its attempt just closed as
-- above): if no attempt of its run ever began, the run has not started after all and
-- goes back to pending; the claim that starts it again starts its deadline. An attempt
-- released by a worker's shutdown did begin: its run keeps its start.
UPDATE ductline_runs SET status = 'pending', started_ms = NULL, deadline_ms = NULL
WHERE id = :run_id AND status = 'running'
  AND NOT EXISTS (SELECT 1 FROM ductline_attempts a WHERE a.run_id = :run_id
                  AND NOT (coalesce(a.error_type, '') = 'Released'
                           AND coalesce(a.error, '') LIKE :given_back));

-- name: run_deadlines
SELECT id, deadline_ms FROM ductline_runs WHERE id IN (SELECT value FROM json_each(:run_ids));

-- name: orphaned_runs
-- Runs that ended (cancelled, failed) while one of their jobs was being claimed:
-- the claim committed after the cancel looked. Maintenance finishes those jobs.
SELECT DISTINCT j.run_id, r.status FROM ductline_jobs j JOIN ductline_runs r ON r.id = j.run_id
WHERE j.status IN ('pending', 'held', 'paused', 'running') AND r.status IN ('cancelled', 'failed')
LIMIT :limit;

-- name: runs_with_prefix
SELECT id FROM ductline_runs WHERE id >= :prefix AND id < :upper ORDER BY id LIMIT 5;

-- name: next_wakeups
-- Both of a worker's timers in one round trip: the earliest not-before time of a
-- pending job and the earliest deadline of an active run or expiry of a pause
-- (each an index lookup): at either, the worker ends what is due (abort.expire_due).
SELECT (SELECT min((SELECT j.not_before_ms FROM ductline_jobs j
                 WHERE j.status = 'pending' AND j.throttled = 0 AND j.priority = q.priority
                   AND j.phase = q.phase AND j.pipeline IN (SELECT value FROM json_each(:pipelines))
                 ORDER BY j.not_before_ms LIMIT 1))
        FROM ductline_ready_queues q) AS not_before_ms,
       (SELECT min(due_ms) FROM (
            SELECT min(deadline_ms) AS due_ms FROM ductline_runs
            WHERE status IN ('pending', 'running', 'paused', 'halted') AND deadline_ms IS NOT NULL
              AND pipeline IN (SELECT value FROM json_each(:pipelines))
            UNION ALL
            SELECT min(pause_expires_ms) FROM ductline_jobs
            WHERE status = 'paused' AND pause_expires_ms IS NOT NULL
              AND pipeline IN (SELECT value FROM json_each(:pipelines))) AS due) AS deadline_ms;

-- name: stop_run
-- A run deadline, a cancel or an expired pause ends the run (`ductline.model.stops`):
-- only from the statuses the stop applies to, so of two racing stops one wins.
UPDATE ductline_runs
SET status = :status, halt_reason = coalesce(:halt_reason, halt_reason), metadata = :metadata,
    finished_ms = ductline_now_ms()
WHERE id = :run_id AND status IN (SELECT value FROM json_each(:from_statuses));

-- name: lock_runs
-- SQLite has one writer at a time (BEGIN IMMEDIATE): reading is enough.
SELECT id, status FROM ductline_runs WHERE id IN (SELECT value FROM json_each(:run_ids)) ORDER BY id;

-- name: lock_run_for_stop
SELECT metadata, timeout_seconds, status FROM ductline_runs WHERE id = :run_id;

-- name: notify_settled
-- SQLite cannot notify other processes: clients waiting for a run poll instead.
SELECT :run_id AS notified;

-- name: complete_runs
-- Complete many runs whose last step completed in one recording transaction.
UPDATE ductline_runs SET status = 'completed', output = x.output, finished_ms = ductline_now_ms()
FROM (SELECT json_extract(value, '$.run_id') AS run_id, json_extract(value, '$.output') AS output
      FROM json_each(:items)) AS x
WHERE ductline_runs.id = x.run_id AND ductline_runs.status = 'running'
RETURNING ductline_runs.id AS id;


-- name: insert_jobs
-- insert_job for many jobs in one statement (a fan-out's elements, a batch's next
-- steps, trigger_many's first jobs); the same rules row by row. (WHERE true: SQLite
-- needs it before ON CONFLICT after a SELECT.)
INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input,
                           not_before_ms, max_retry, max_crash, retry_delay_seconds, timeout_seconds, created_ms,
                           priority, limit_key, phase)
SELECT x.id, x.run_id, x.pipeline, x.step, x.scope, x.parent_scope, x.elem_index,
       CASE WHEN x.status <> 'auto' THEN x.status
            WHEN r.status IN ('pending', 'running', 'paused') THEN 'pending'
            ELSE 'held' END,
       x.input, coalesce(x.not_before_ms, ductline_now_ms() + x.delay_ms), x.max_retry, x.max_crash,
       x.retry_delay_seconds, x.timeout_seconds, ductline_now_ms(),
       coalesce(r.priority, 0) + x.priority, x.limit_key, x.phase
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.run_id') AS run_id,
             json_extract(value, '$.pipeline') AS pipeline, json_extract(value, '$.step') AS step,
             json_extract(value, '$.scope') AS scope, json_extract(value, '$.parent_scope') AS parent_scope,
             json_extract(value, '$.elem_index') AS elem_index, json_extract(value, '$.status') AS status,
             json_extract(value, '$.input') AS input, json_extract(value, '$.not_before_ms') AS not_before_ms,
             json_extract(value, '$.delay_ms') AS delay_ms, json_extract(value, '$.max_retry') AS max_retry,
             json_extract(value, '$.max_crash') AS max_crash,
             json_extract(value, '$.retry_delay_seconds') AS retry_delay_seconds,
             json_extract(value, '$.timeout_seconds') AS timeout_seconds,
             json_extract(value, '$.priority') AS priority, json_extract(value, '$.limit_key') AS limit_key,
             json_extract(value, '$.phase') AS phase, key AS position
      FROM json_each(:items)) AS x
LEFT JOIN ductline_runs r ON r.id = x.run_id
WHERE true
ORDER BY x.position
ON CONFLICT (run_id, step, scope) DO NOTHING;

-- name: insert_runs
-- insert_run for many runs without idempotency keys (trigger_many): one statement.
INSERT INTO ductline_runs (id, pipeline, status, args, timeout_seconds, not_before_ms, created_ms,
                           idempotency_key, priority)
SELECT json_extract(value, '$.id'), json_extract(value, '$.pipeline'), 'pending', json_extract(value, '$.args'),
       json_extract(value, '$.timeout_seconds'),
       coalesce(json_extract(value, '$.not_before_ms'), ductline_now_ms() + json_extract(value, '$.delay_ms')),
       ductline_now_ms(), NULL, json_extract(value, '$.priority')
FROM json_each(:items) ORDER BY key;

-- name: insert_attempts
-- insert_attempt for every job of a claim in one statement.
INSERT INTO ductline_attempts (job_id, attempt, run_id, lease_token, worker_id, started_ms, deadline_ms)
SELECT json_extract(value, '$.job_id'), json_extract(value, '$.attempt'), json_extract(value, '$.run_id'),
       json_extract(value, '$.lease_token'), json_extract(value, '$.worker_id'),
       json_extract(value, '$.started_ms'), json_extract(value, '$.deadline_ms')
FROM json_each(:items) ORDER BY key;

-- name: claim_start_jobs
-- PostgreSQL claims, starts the runs and inserts the attempts in one statement, to
-- save round trips. SQLite runs in-process (a statement costs no round trip) and
-- cannot modify two tables in one statement: Tx claims there with claim_jobs,
-- start_runs and insert_attempts, and never runs this one.
SELECT NULL AS id WHERE 0;

-- name: complete_close_jobs
-- As claim_start_jobs: on SQLite, Tx runs complete_jobs and close_succeeded_attempts.
SELECT NULL AS id WHERE 0;

-- name: insert_run_with_job
-- As claim_start_jobs: on SQLite, Tx runs insert_run, insert_job and notify.
SELECT NULL AS id WHERE 0;
