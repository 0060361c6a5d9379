-- Named statements for SQLite that PostgreSQL writes its own way (JSON lists through
-- json_each, one writer at a time instead of row locks); the rest are in
-- ../shared/queries.sql. ductline_now_ms() is the database clock; the loader expands
-- it to SQLite's own millisecond time (julianday('now'), read per statement).

-- name: insert_run
-- A second trigger with the key of an active run inserts nothing (0 rows): the
-- partial unique index ductline_runs_idempotency decides, also between racing triggers.
-- {UNFINISHED_RUN} renders as that index's predicate is written in schema.sql (the
-- statuses in declaration order): SQLite matches the conflict target by its text.
INSERT INTO ductline_runs (id, pipeline, status, args, timeout_seconds, not_before_ms, created_ms,
                           idempotency_key, priority, definition)
VALUES (:id, :pipeline, 'pending', :args, :timeout_seconds,
        coalesce(:not_before_ms, ductline_now_ms() + :delay_ms), ductline_now_ms(), :idempotency_key, :priority,
        :definition)
ON CONFLICT (pipeline, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND status IN ({UNFINISHED_RUN})
DO NOTHING;

-- name: insert_job
-- The not-before time is read from the clock when this statement runs, inside the
-- transaction that records the previous step's completion, i.e. just before commit.
-- :status 'auto' (ductline.store.records.AUTO_STATUS) lets the run decide, as
-- ductline.model.states.waiting_status does: pending while the run is active, held
-- once it halted (so nothing new starts until a retry).
INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input,
                           not_before_ms, max_retry, max_crash, retry_delay_seconds, timeout_seconds, created_ms,
                           priority, limit_key, phase, queue, definition)
VALUES (:id, :run_id, :pipeline, :step, :scope, :parent_scope, :elem_index,
        CASE WHEN :status <> 'auto' THEN :status
             WHEN (SELECT r.status FROM ductline_runs r WHERE r.id = :run_id) IN ({ACTIVE_RUN}) THEN 'pending'
             ELSE 'held' END,
        :input, coalesce(:not_before_ms, ductline_now_ms() + :delay_ms), :max_retry, :max_crash,
        :retry_delay_seconds, :timeout_seconds, ductline_now_ms(),
        -- a job's priority is its run's plus its step's (see Pipeline(priority=))
        coalesce((SELECT r.priority FROM ductline_runs r WHERE r.id = :run_id), 0) + :priority, :limit_key,
        -- the claim order at equal priority: a run's first step after the jobs of runs
        -- under way (ductline.model.claim_order)
        :phase, :queue, :definition)
ON CONFLICT (run_id, step, scope) DO NOTHING;

-- name: insert_claimed_job
-- PostgreSQL's hand-off in one statement. Tx.insert_claimed runs insert_job and
-- claim_by_ids here instead (statements cost no round trip): never run.
SELECT NULL AS id WHERE false;

-- name: claim_jobs
-- SQLite serialises writers (BEGIN IMMEDIATE), so no row can be claimed twice.
-- One (queue, priority, phase) range per statement (the store walks ready_queues in
-- claim order, ductline.model.claim_order), read in not-before order from the ready
-- index: delayed jobs, and jobs of queues the worker does not serve, are never scanned.
-- :definitions: the definitions the worker loaded (NULL: any).
UPDATE ductline_jobs
SET status = 'running', attempts = attempts + 1, lease_token = lower(hex(randomblob(16))),
    lease_expires_ms = ductline_now_ms() + :lease_ms, worker_id = :worker_id
WHERE id IN (
    SELECT id FROM ductline_jobs
    WHERE status = 'pending' AND throttled = 0 AND queue = :queue AND priority = :priority AND phase = :phase
      AND not_before_ms <= ductline_now_ms()
      AND pipeline IN (SELECT value FROM json_each(:pipelines))
      AND (:definitions IS NULL OR definition IN (SELECT value FROM json_each(:definitions)))
    ORDER BY not_before_ms
    LIMIT :limit
)
RETURNING id, run_id, pipeline, step, scope, input, attempts, lease_token, timeout_seconds,
          boundary, not_before_ms, limit_key, priority, phase, ductline_now_ms() AS claimed_ms;

-- name: renew_leases
UPDATE ductline_jobs SET lease_expires_ms = ductline_now_ms() + :lease_ms
-- An expired lease is never renewed: rescuers may already have taken it.
-- A lease in a run that ended (cancelled, failed) is lost: its worker kills the attempt.
WHERE status = 'running' AND lease_expires_ms >= ductline_now_ms() AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = ductline_jobs.run_id
                 AND r.status IN ({UNFINISHED_RUN}))
  AND lease_token IN (SELECT value FROM json_each(:tokens))
RETURNING lease_token;

-- name: leases_held
-- renew_leases' test without the write: which of these leases a renewal would keep.
SELECT lease_token FROM ductline_jobs
WHERE status = 'running' AND lease_expires_ms >= ductline_now_ms() AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = ductline_jobs.run_id
                 AND r.status IN ({UNFINISHED_RUN}))
  AND lease_token IN (SELECT value FROM json_each(:tokens));

-- name: confirm_leases
-- leases_held's test on the held jobs whose time came (by id), run by
-- Store.confirm_leases inside a write transaction: SQLite's readers never wait for
-- its one writer (WAL), so a plain read could answer from before a stop that is
-- still open; holding the write lock (BEGIN IMMEDIATE), this waits for the stop's
-- commit, or the stop waits for it and reads its instant after the job's time.
SELECT j.lease_token FROM ductline_jobs j
WHERE j.id IN (SELECT value FROM json_each(:job_ids))
  AND j.lease_token IN (SELECT value FROM json_each(:tokens))
  AND j.status = 'running' AND j.lease_expires_ms >= ductline_now_ms()
  AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = j.run_id AND r.status IN ({UNFINISHED_RUN}));

-- name: close_attempt
-- started_ms: when the attempt really began, if later than its claim (a job claimed
-- ahead waited in its worker's queue); never before the claim; NULL keeps it. With a
-- later start comes the deadline the attempt ran under (its timeout counted from it).
-- Never after its end either: one claimed before its not-before time starts at that
-- time (_start_claimed), and given back before it, it ends unstarted, then.
-- finished_ms: when it ended, if before now (a rescued attempt: its lease's expiry,
-- ductline.model.outcomes.lease_expired); never before its start as this statement
-- sets it (the row's own start may be a held job's future time, taken back to now).
UPDATE ductline_attempts
SET result = :result,
    finished_ms = MAX(MIN(MAX(started_ms, COALESCE(:started_ms, started_ms)), ductline_now_ms()),
                      MIN(ductline_now_ms(), COALESCE(:finished_ms, ductline_now_ms()))),
    error_type = :error_type, error = :error,
    traceback = :traceback,
    started_ms = MIN(MAX(started_ms, COALESCE(:started_ms, started_ms)), ductline_now_ms()),
    deadline_ms = CASE WHEN :started_ms > started_ms THEN :deadline_ms ELSE deadline_ms END
WHERE job_id = :job_id AND attempt = :attempt AND lease_token = :lease_token AND result IS NULL;

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

-- name: gather_branches
SELECT step, output FROM ductline_jobs
WHERE run_id = :run_id AND scope = :scope AND status = 'completed'
  AND step IN (SELECT value FROM json_each(:steps));

-- name: expired_leases
SELECT id, run_id, pipeline, step, scope, attempts, lease_token, definition, lease_expires_ms FROM ductline_jobs
WHERE status = 'running' AND lease_expires_ms < ductline_now_ms()
ORDER BY lease_expires_ms
LIMIT :limit;

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
SET status = 'pending', failures = 0, crashes = 0, releases = 0, finished_ms = NULL, throttled = 0,
    -- Why it was cancelled or skipped no longer holds: it waits to run again.
    skip_reason = NULL, skip_root = NULL,
    not_before_ms = CASE WHEN not_before_ms > ductline_now_ms() THEN not_before_ms ELSE ductline_now_ms() END,
    -- A crossed boundary is cleared only for the steps an operator forced by name.
    boundary = CASE WHEN step IN (SELECT value FROM json_each(:force_steps)) THEN NULL ELSE boundary END
WHERE run_id = :run_id AND status IN ({REVIVABLE_JOB});

-- name: next_not_before
-- The earliest not-before time of a claimable job: one index lookup per served
-- queue, priority level and phase, however many jobs wait.
SELECT (SELECT min((SELECT j.not_before_ms FROM ductline_jobs j
                 WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = q.queue
                   AND j.priority = q.priority AND j.phase = q.phase
                   AND j.pipeline IN (SELECT value FROM json_each(:pipelines))
                   AND (:definitions IS NULL OR j.definition IN (SELECT value FROM json_each(:definitions)))
                 ORDER BY j.not_before_ms LIMIT 1))
        FROM ductline_ready_queues q WHERE q.queue IN (SELECT value FROM json_each(:queues))) AS not_before_ms;

-- name: list_runs
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms, definition
FROM ductline_runs
WHERE (:status IS NULL OR status = :status) AND (:pipeline IS NULL OR pipeline = :pipeline)
ORDER BY created_ms DESC, id DESC
LIMIT :limit;

-- name: notify
-- SQLite has no LISTEN/NOTIFY: workers wake on their not-before timer and poll.
SELECT 0 AS notified;

-- name: notify_cancel
-- Workers learn of a cancel at their next heartbeat (their lease renewal fails).
SELECT 0 AS notified;

-- name: insert_skipped_job
-- A dependent that was never created is recorded skipped, so a run's record is whole.
INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input,
                           not_before_ms, max_retry, max_crash, retry_delay_seconds, skip_reason,
                           skip_root, created_ms, finished_ms)
VALUES (:id, :run_id, :pipeline, :step, :scope, :parent_scope, :elem_index, 'skipped', '[]',
        ductline_now_ms(), 0, 0, 0, :reason, :root, ductline_now_ms(), ductline_now_ms())
ON CONFLICT (run_id, step, scope) DO NOTHING;

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
                 AND r.status IN ({UNFINISHED_RUN}))
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

-- name: run_ends
-- The times and end of finished runs, by id (the worker's one log line per run
-- end reads those that ended together in one round trip).
SELECT id, created_ms, started_ms, finished_ms, halt_reason, metadata FROM ductline_runs WHERE id IN (SELECT value FROM json_each(:run_ids));

-- name: run_deadlines
SELECT id, deadline_ms FROM ductline_runs WHERE id IN (SELECT value FROM json_each(:run_ids));

-- name: next_wakeups
-- Both of a worker's timers in one round trip: the earliest not-before time of a
-- pending job and the earliest deadline of an active run or expiry of a pause
-- (each an index lookup): at either, the worker ends what is due (abort.expire_due).
SELECT (SELECT min((SELECT j.not_before_ms FROM ductline_jobs j
                 WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = q.queue
                   AND j.priority = q.priority AND j.phase = q.phase
                   AND j.pipeline IN (SELECT value FROM json_each(:pipelines))
                   AND (:definitions IS NULL OR j.definition IN (SELECT value FROM json_each(:definitions)))
                 ORDER BY j.not_before_ms LIMIT 1))
        FROM ductline_ready_queues q WHERE q.queue IN (SELECT value FROM json_each(:queues))) AS not_before_ms,
       (SELECT min(due_ms) FROM (
            SELECT min(deadline_ms) AS due_ms FROM ductline_runs
            WHERE status IN ({UNFINISHED_RUN}) AND deadline_ms IS NOT NULL
              AND pipeline IN (SELECT value FROM json_each(:pipelines))
            UNION ALL
            SELECT min(pause_expires_ms) FROM ductline_jobs
            WHERE status = 'paused' AND pause_expires_ms IS NOT NULL
              AND pipeline IN (SELECT value FROM json_each(:pipelines))
            UNION ALL
            SELECT min(pause_expires_ms) FROM ductline_jobs
            WHERE status = 'deferred' AND pause_expires_ms IS NOT NULL
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
SELECT metadata, timeout_seconds, status, deadline_ms FROM ductline_runs WHERE id = :run_id;

-- name: lock_running_jobs
-- SQLite's single writer already holds the database (BEGIN IMMEDIATE): nothing to lock.
SELECT id FROM ductline_jobs WHERE run_id = :run_id AND status = 'running';

-- name: notify_settled
-- SQLite cannot notify other processes: clients waiting for a run poll instead.
SELECT :run_id AS notified;

-- name: complete_runs
-- Complete many runs whose last step completed in one recording transaction.
UPDATE ductline_runs SET status = 'completed', output = x.output, finished_ms = ductline_now_ms()
FROM (SELECT json_extract(value, '$.run_id') AS run_id, json_extract(value, '$.output') AS output
      FROM json_each(:items)) AS x
WHERE ductline_runs.id = x.run_id AND ductline_runs.status = 'running'
-- Each run's parent, if it is a child run (Tx.ended_parents: its end may wake that parent).
RETURNING ductline_runs.id AS id, parent_run_id, parent_job_id;

-- name: insert_jobs
-- insert_job for many jobs in one statement (a fan-out's elements, a batch's next
-- steps, trigger_many's first jobs); the same rules row by row. (WHERE true: SQLite
-- needs it before ON CONFLICT after a SELECT.) A field absent from a row of :items is
-- :common's, read once (Tx.insert_jobs sends the values every row shares once,
-- `shared_fields`).
WITH c AS MATERIALIZED (SELECT json_extract(:common, '$.id') AS id,
                        json_extract(:common, '$.run_id') AS run_id,
                        json_extract(:common, '$.pipeline') AS pipeline,
                        json_extract(:common, '$.step') AS step, json_extract(:common, '$.scope') AS scope,
                        json_extract(:common, '$.parent_scope') AS parent_scope,
                        json_extract(:common, '$.elem_index') AS elem_index,
                        json_extract(:common, '$.status') AS status, json_extract(:common, '$.input') AS input,
                        json_extract(:common, '$.not_before_ms') AS not_before_ms,
                        json_extract(:common, '$.delay_ms') AS delay_ms,
                        json_extract(:common, '$.max_retry') AS max_retry,
                        json_extract(:common, '$.max_crash') AS max_crash,
                        json_extract(:common, '$.retry_delay_seconds') AS retry_delay_seconds,
                        json_extract(:common, '$.timeout_seconds') AS timeout_seconds,
                        json_extract(:common, '$.priority') AS priority,
                        json_extract(:common, '$.limit_key') AS limit_key,
                        json_extract(:common, '$.phase') AS phase, json_extract(:common, '$.queue') AS queue,
                        json_extract(:common, '$.definition') AS definition)
INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input,
                           not_before_ms, max_retry, max_crash, retry_delay_seconds, timeout_seconds, created_ms,
                           priority, limit_key, phase, queue, definition)
SELECT x.id, x.run_id, x.pipeline, x.step, x.scope, x.parent_scope, x.elem_index,
       CASE WHEN x.status <> 'auto' THEN x.status
            WHEN r.status IN ({ACTIVE_RUN}) THEN 'pending'
            ELSE 'held' END,
       x.input, coalesce(x.not_before_ms, ductline_now_ms() + x.delay_ms), x.max_retry, x.max_crash,
       x.retry_delay_seconds, x.timeout_seconds, ductline_now_ms(),
       coalesce(r.priority, 0) + x.priority, x.limit_key, x.phase, x.queue, x.definition
FROM (SELECT coalesce(json_extract(value, '$.id'), c.id) AS id,
             coalesce(json_extract(value, '$.run_id'), c.run_id) AS run_id,
             coalesce(json_extract(value, '$.pipeline'), c.pipeline) AS pipeline,
             coalesce(json_extract(value, '$.step'), c.step) AS step,
             coalesce(json_extract(value, '$.scope'), c.scope) AS scope,
             coalesce(json_extract(value, '$.parent_scope'), c.parent_scope) AS parent_scope,
             coalesce(json_extract(value, '$.elem_index'), c.elem_index) AS elem_index,
             coalesce(json_extract(value, '$.status'), c.status) AS status,
             coalesce(json_extract(value, '$.input'), c.input) AS input,
             coalesce(json_extract(value, '$.not_before_ms'), c.not_before_ms) AS not_before_ms,
             coalesce(json_extract(value, '$.delay_ms'), c.delay_ms) AS delay_ms,
             coalesce(json_extract(value, '$.max_retry'), c.max_retry) AS max_retry,
             coalesce(json_extract(value, '$.max_crash'), c.max_crash) AS max_crash,
             coalesce(json_extract(value, '$.retry_delay_seconds'), c.retry_delay_seconds) AS retry_delay_seconds,
             coalesce(json_extract(value, '$.timeout_seconds'), c.timeout_seconds) AS timeout_seconds,
             coalesce(json_extract(value, '$.priority'), c.priority) AS priority,
             coalesce(json_extract(value, '$.limit_key'), c.limit_key) AS limit_key,
             coalesce(json_extract(value, '$.phase'), c.phase) AS phase,
             coalesce(json_extract(value, '$.queue'), c.queue) AS queue,
             coalesce(json_extract(value, '$.definition'), c.definition) AS definition, key AS position
      FROM json_each(:items) CROSS JOIN c) AS x
LEFT JOIN ductline_runs r ON r.id = x.run_id
WHERE true
ORDER BY x.position
ON CONFLICT (run_id, step, scope) DO NOTHING;

-- name: insert_runs
-- insert_run for many runs without idempotency keys (trigger_many): one statement.
INSERT INTO ductline_runs (id, pipeline, status, args, timeout_seconds, not_before_ms, created_ms,
                           idempotency_key, priority, definition)
SELECT json_extract(value, '$.id'), json_extract(value, '$.pipeline'), 'pending', json_extract(value, '$.args'),
       json_extract(value, '$.timeout_seconds'),
       coalesce(json_extract(value, '$.not_before_ms'), ductline_now_ms() + json_extract(value, '$.delay_ms')),
       ductline_now_ms(), NULL, json_extract(value, '$.priority'), json_extract(value, '$.definition')
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

-- name: halt_hold_settle
-- As claim_start_jobs: on SQLite, Tx runs halt_run, hold_jobs and notify_settled.
SELECT NULL AS id WHERE 0;

-- name: insert_run_with_job
-- As claim_start_jobs: on SQLite, Tx runs insert_run, insert_job and notify.
SELECT NULL AS id WHERE 0;

-- name: context_lease
-- A step's context write goes on only while its attempt holds the lease (fencing):
-- after a cancel (which takes the lease), the end of its run or a lost lease, this
-- finds nothing and the write is refused. SQLite's writes are serialized: no cancel or
-- prune can come between this read and the write of the same transaction.
SELECT 1 AS held FROM ductline_jobs j
WHERE j.id = :job_id AND j.run_id = :run_id AND j.lease_token = :lease_token AND j.status = 'running'
  AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = j.run_id AND r.status IN ({UNFINISHED_RUN}));
