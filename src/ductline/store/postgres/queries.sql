-- Named statements for PostgreSQL that SQLite writes its own way (JSON lists through
-- jsonb, row locks, statements fused to save round trips, LISTEN/NOTIFY); the rest
-- are in ../shared/queries.sql. ductline_now_ms() (schema.sql) reads
-- clock_timestamp(): the time the statement runs, never the transaction's start.

-- name: insert_run
-- A second trigger with the key of an active run inserts nothing (0 rows): the
-- partial unique index ductline_runs_idempotency decides, also between racing triggers.
-- {UNFINISHED_RUN} renders as that index's predicate is written in schema.sql (the
-- statuses in declaration order): SQLite matches the conflict target by its text.
INSERT INTO ductline_runs (id, pipeline, status, args, timeout_seconds, not_before_ms, created_ms,
                           idempotency_key, priority, definition)
-- One clock read per row: its not-before time and created time come from the same instant.
SELECT :id, :pipeline, 'pending', :args, :timeout_seconds,
       coalesce(:not_before_ms, c.now_ms + :delay_ms), c.now_ms, :idempotency_key, :priority, :definition
FROM (SELECT ductline_now_ms() AS now_ms) AS c
ON CONFLICT (pipeline, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND status IN ({UNFINISHED_RUN})
DO NOTHING;

-- name: insert_run_with_job
-- A trigger in one statement: the run, its first job and the wake-up at commit. One
-- clock read gives the run and the job the same created and not-before times. The job
-- is built from the run this statement inserted (its priority is the run's plus the
-- step's), so a key held by an active run, which inserts no run, inserts no job and
-- wakes nobody: 0 rows come back. The job's insert has no ON CONFLICT: its run is
-- the one just inserted, which has no job yet (an arbiter would cost a speculative
-- insertion, its lock and its WAL record on every trigger).
WITH c AS (SELECT ductline_now_ms() AS now_ms),
run AS (
    INSERT INTO ductline_runs (id, pipeline, status, args, timeout_seconds, not_before_ms, created_ms,
                               idempotency_key, priority, definition)
    SELECT :id, :pipeline, 'pending', :args, :timeout_seconds,
           coalesce(:not_before_ms, c.now_ms + :delay_ms), c.now_ms, :idempotency_key, :priority, :definition
    FROM c
    ON CONFLICT (pipeline, idempotency_key)
        WHERE idempotency_key IS NOT NULL AND status IN ({UNFINISHED_RUN})
    DO NOTHING
    RETURNING id, priority
), job AS (
    INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input,
                               not_before_ms, max_retry, max_crash, retry_delay_seconds, timeout_seconds,
                               created_ms, priority, limit_key, phase, queue, definition)
    SELECT :job_id, run.id, :pipeline, :step, :scope, :parent_scope, :elem_index, :job_status::text, :input,
           coalesce(:job_not_before_ms, c.now_ms + :job_delay_ms), :max_retry, :max_crash,
           :retry_delay_seconds, :job_timeout_seconds, c.now_ms, run.priority + :job_priority, :limit_key,
           :phase, :queue, :definition
    FROM run, c
)
SELECT run.id, pg_notify('ductline_jobs', :origin::text) AS notified FROM run;

-- name: insert_job
-- pg_notify (on commit) wakes workers waiting in LISTEN.
-- The not-before time is read from the clock when this statement runs, inside the
-- transaction that records the previous step's completion, i.e. just before commit.
-- :status 'auto' (ductline.store.records.AUTO_STATUS) lets the run decide, as
-- ductline.model.states.waiting_status does: pending while the run is active, held
-- once it halted (so nothing new starts until a retry).
INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input,
                           not_before_ms, max_retry, max_crash, retry_delay_seconds, timeout_seconds, created_ms,
                           priority, limit_key, phase, queue, definition)
SELECT :id, :run_id, :pipeline, :step, :scope, :parent_scope, :elem_index,
       CASE WHEN :status::text <> 'auto' THEN :status::text
            WHEN (SELECT r.status FROM ductline_runs r WHERE r.id = :run_id) IN ({ACTIVE_RUN}) THEN 'pending'
            ELSE 'held' END,
       -- one clock read: the not-before time and the created time are the same instant
       :input, coalesce(:not_before_ms, c.now_ms + :delay_ms), :max_retry, :max_crash,
       :retry_delay_seconds, :timeout_seconds, c.now_ms,
       -- a job's priority is its run's plus its step's (see Pipeline(priority=))
       coalesce((SELECT r.priority FROM ductline_runs r WHERE r.id = :run_id), 0) + :priority, :limit_key,
       -- the claim order at equal priority: a run's first step after the jobs of runs
       -- under way (ductline.model.claim_order)
       :phase, :queue, :definition
FROM (SELECT ductline_now_ms() AS now_ms) AS c
ON CONFLICT (run_id, step, scope) DO NOTHING;

-- name: insert_claimed_job
-- A hand-off (Tx.insert_claimed): insert_job for a job ready now, claimed at once by
-- :worker_id with its first attempt, as claim_start_jobs claims: one statement instead
-- of the insert and a claim that reads the ready queues. The caller holds the run's
-- lock (it recorded the completion that made the job ready). Only an active run under
-- way gets its job claimed; in any other the job is inserted as insert_job inserts it
-- (held once the run halted) and no row comes back, nor for a job that exists already.
WITH c AS (SELECT ductline_now_ms() AS now_ms),
r AS (SELECT r.status, r.status <> 'pending' AND r.status IN ({ACTIVE_RUN}) AS claimable, r.priority,
             r.deadline_ms
      FROM ductline_runs r WHERE r.id = :run_id),
job AS (
    INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input,
                               not_before_ms, max_retry, max_crash, retry_delay_seconds, timeout_seconds,
                               created_ms, priority, limit_key, phase, attempts, lease_token,
                               lease_expires_ms, worker_id, queue, definition)
    SELECT :id, :run_id, :pipeline, :step, :scope, :parent_scope, :elem_index,
           CASE WHEN r.claimable THEN 'running' WHEN r.status IN ({ACTIVE_RUN}) THEN 'pending' ELSE 'held' END,
           :input, c.now_ms, :max_retry, :max_crash, :retry_delay_seconds, :timeout_seconds, c.now_ms,
           coalesce(r.priority, 0) + :priority, NULL, :phase,
           CASE WHEN r.claimable THEN 1 ELSE 0 END,
           CASE WHEN r.claimable THEN gen_random_uuid()::text END,
           CASE WHEN r.claimable THEN c.now_ms + :lease_ms END,
           CASE WHEN r.claimable THEN :worker_id::text END, :queue, :definition
    FROM c LEFT JOIN r ON true
    ON CONFLICT (run_id, step, scope) DO NOTHING
    RETURNING id, run_id, pipeline, step, scope, input, attempts, lease_token, timeout_seconds, boundary,
              not_before_ms, limit_key, priority, phase, status, created_ms AS claimed_ms
), rows AS (
    -- LEAST ignores NULLs: the earlier of the step's and the run's deadline, if any
    SELECT job.*, r.deadline_ms AS run_deadline_ms,
           LEAST(job.claimed_ms + job.timeout_seconds * 1000, r.deadline_ms) AS deadline_ms
    FROM job CROSS JOIN r WHERE job.status = 'running'
), attempts AS (
    INSERT INTO ductline_attempts (job_id, attempt, run_id, lease_token, worker_id, started_ms, deadline_ms)
    SELECT id, attempts, run_id, lease_token, :worker_id, claimed_ms, deadline_ms FROM rows
)
SELECT * FROM rows;

-- name: claim_jobs
-- SQLite's claim of one (priority, phase) queue. PostgreSQL claims, starts the runs and
-- inserts the attempts in one statement, claim_start_jobs (the claim order and the
-- locks are described there), or, under limits and for the oldest-first claim, through
-- claim_candidates and claim_by_ids: Tx never runs this one here.
SELECT NULL AS id WHERE false;

-- name: renew_leases
UPDATE ductline_jobs SET lease_expires_ms = ductline_now_ms() + :lease_ms
-- An expired lease is never renewed: rescuers may already have taken it.
-- A lease in a run that ended (cancelled, failed) is lost: its worker kills the attempt.
WHERE status = 'running' AND lease_expires_ms >= ductline_now_ms() AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = ductline_jobs.run_id
                 AND r.status IN ({UNFINISHED_RUN}))
  AND lease_token IN (SELECT jsonb_array_elements_text(:tokens::jsonb))
RETURNING lease_token;

-- name: leases_held
-- renew_leases' test without the write: which of these leases a renewal would keep.
SELECT lease_token FROM ductline_jobs
WHERE status = 'running' AND lease_expires_ms >= ductline_now_ms() AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = ductline_jobs.run_id
                 AND r.status IN ({UNFINISHED_RUN}))
  AND lease_token IN (SELECT jsonb_array_elements_text(:tokens::jsonb));

-- name: confirm_leases
-- A worker confirms the leases of held jobs whose time came before it starts them
-- (ductline.runtime.horizon): leases_held's test on those rows only (by id), each
-- row locked FOR KEY SHARE. That mode conflicts with FOR UPDATE alone -- the lock a
-- stop takes on its run's running jobs before it reads its instant
-- (lock_running_jobs) -- and not with the updates of recordings and renewals (FOR NO
-- KEY UPDATE). So either the stop locked first: this waits for its commit, and the
-- row's newest version (READ COMMITTED checks it again) is taken back or ended, the
-- lease gone; or this locked first: the stop reads its instant after it, past the
-- job's time, and counts the job begun (ductline.model.stops.begun_by). In id order,
-- as the stop locks: no deadlock between the two. One statement, no write: the
-- confirmation costs a round trip, where a renewal cost a transaction.
-- Its commit does not wait for the WAL to reach the disk (synchronous_commit off, for
-- this transaction only): nothing it leaves must outlive a crash -- its row locks end
-- with its transaction, and a crash ends a stop's open transaction too -- and a stop
-- that waited for it commits later, flushing it with its own. The flush took nine
-- tenths of the statement's time (3 ms against 0.2 ms, on a loaded machine).
SELECT j.lease_token FROM ductline_jobs j, (SELECT set_config('synchronous_commit', 'off', true)) AS async
WHERE j.id IN (SELECT jsonb_array_elements_text(:job_ids::jsonb))
  AND j.lease_token IN (SELECT jsonb_array_elements_text(:tokens::jsonb))
  AND j.status = 'running' AND j.lease_expires_ms >= ductline_now_ms()
  AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = j.run_id AND r.status IN ({UNFINISHED_RUN}))
ORDER BY j.id
FOR KEY SHARE OF j;

-- name: close_attempt
-- started_ms: when the attempt really began, if later than its claim (a job claimed
-- ahead waited in its worker's queue); never before the claim, and NULL (GREATEST
-- skips it) keeps the claim time. With a later start comes the deadline the attempt
-- ran under (its timeout counted from that start): deadline_ms. Never after its end
-- either: one claimed before its not-before time starts at that time (claim_start_jobs),
-- and given back before it, it ends unstarted, then.
-- (The clock read once: its end and that bound are the same instant.)
-- finished_ms: when it ended, if before now (a rescued attempt: its lease's expiry,
-- ductline.model.outcomes.lease_expired); never before its start as this statement
-- sets it (the row's own start may be a held job's future time, taken back to now).
UPDATE ductline_attempts
SET result = :result,
    finished_ms = GREATEST(LEAST(GREATEST(started_ms, :started_ms::bigint), c.now_ms),
                           LEAST(c.now_ms, COALESCE(:finished_ms::bigint, c.now_ms))),
    error_type = :error_type, error = :error,
    traceback = :traceback, started_ms = LEAST(GREATEST(started_ms, :started_ms::bigint), c.now_ms),
    deadline_ms = CASE WHEN :started_ms::bigint > started_ms THEN :deadline_ms::bigint ELSE deadline_ms END
FROM (SELECT ductline_now_ms() AS now_ms) c
WHERE job_id = :job_id AND attempt = :attempt AND lease_token = :lease_token AND result IS NULL;

-- name: arrive_fanins
-- One row per fan-in, bumped in the completing transaction by the number of arrivals
-- the batch brings (:items, one per fan-in, in key order): deciding that the last
-- branch arrived costs O(1), never a scan of the siblings.
INSERT INTO ductline_fanins (run_id, step, scope, expected, arrived)
SELECT x.run_id, x.step, x.scope, x.expected, x.n
FROM jsonb_to_recordset(:items::jsonb) AS x(run_id text, step text, scope text, expected bigint, n bigint)
ORDER BY x.run_id, x.step, x.scope
ON CONFLICT (run_id, step, scope) DO UPDATE SET arrived = ductline_fanins.arrived + excluded.arrived
RETURNING run_id, step, scope, arrived, expected;

-- name: gather_branches
SELECT step, output FROM ductline_jobs
WHERE run_id = :run_id AND scope = :scope AND status = 'completed'
  AND step IN (SELECT jsonb_array_elements_text(:steps::jsonb));

-- name: expired_leases
SELECT id, run_id, pipeline, step, scope, attempts, lease_token, definition, lease_expires_ms FROM ductline_jobs
WHERE status = 'running' AND lease_expires_ms < (SELECT ductline_now_ms())
ORDER BY lease_expires_ms
LIMIT :limit
FOR UPDATE SKIP LOCKED;

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
    metadata = jsonb_set(metadata::jsonb - 'halted_step' - 'error' - 'reasons', '{revived}',
                         to_jsonb(coalesce((metadata::jsonb ->> 'revived')::int, 0) + 1))::text,
    finished_ms = NULL
WHERE id = :run_id AND status = 'halted';

-- name: revive_jobs
UPDATE ductline_jobs
SET status = 'pending', failures = 0, crashes = 0, releases = 0, finished_ms = NULL, throttled = 0,
    -- Why it was cancelled or skipped no longer holds: it waits to run again.
    skip_reason = NULL, skip_root = NULL,
    not_before_ms = CASE WHEN not_before_ms > ductline_now_ms() THEN not_before_ms ELSE ductline_now_ms() END,
    -- A crossed boundary is cleared only for the steps an operator forced by name.
    boundary = CASE WHEN step IN (SELECT jsonb_array_elements_text(:force_steps::jsonb)) THEN NULL ELSE boundary END
WHERE run_id = :run_id AND status IN ({REVIVABLE_JOB});

-- name: next_not_before
-- The earliest not-before time of a claimable job: one index lookup per served
-- queue, priority level and phase, however many jobs wait.
SELECT (SELECT min((SELECT j.not_before_ms FROM ductline_jobs j
                 WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = q.queue
                   AND j.priority = q.priority AND j.phase = q.phase
                   AND j.pipeline = ANY(ARRAY(SELECT jsonb_array_elements_text(:pipelines::jsonb)))
                   AND (:definitions::jsonb IS NULL OR :definitions::jsonb ? j.definition)
                 ORDER BY j.not_before_ms LIMIT 1))
        FROM ductline_ready_queues q
        WHERE :queues::jsonb ? q.queue) AS not_before_ms;

-- name: list_runs
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms, definition
FROM ductline_runs
WHERE (:status::text IS NULL OR status = :status) AND (:pipeline::text IS NULL OR pipeline = :pipeline)
ORDER BY created_ms DESC, id DESC
LIMIT :limit;

-- name: notify
-- Delivered at commit to every worker in LISTEN ductline_jobs. The payload names the
-- worker whose recording sent it ('' otherwise): that worker ignores it.
SELECT pg_notify('ductline_jobs', :origin::text) AS notified;

-- name: notify_cancel
-- Tells every worker to renew its leases now: those that lost one kill the attempt.
SELECT pg_notify('ductline_jobs', 'cancel') AS notified;

-- name: insert_skipped_job
-- A dependent that was never created is recorded skipped, so a run's record is whole.
INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input,
                           not_before_ms, max_retry, max_crash, retry_delay_seconds, skip_reason,
                           skip_root, created_ms, finished_ms)
SELECT :id, :run_id, :pipeline, :step, :scope, :parent_scope, :elem_index, 'skipped', '[]',
       c.now_ms, 0, 0, 0, :reason, :root, c.now_ms, c.now_ms
FROM (SELECT ductline_now_ms() AS now_ms) AS c
ON CONFLICT (run_id, step, scope) DO NOTHING;

-- name: complete_jobs
-- Record many succeeded attempts in one statement (fenced per row by its token).
UPDATE ductline_jobs
SET status = 'completed', output = x.output, lease_token = NULL, lease_expires_ms = NULL,
    finished_ms = ductline_now_ms()
FROM jsonb_to_recordset(:items::jsonb) AS x(job_id text, lease_token text, output text)
WHERE ductline_jobs.id = x.job_id AND ductline_jobs.lease_token = x.lease_token
  -- By id (an index probe per job), as in claim_start_jobs. The status is compared
  -- with a value the planner cannot see (an init plan), so the partial lease index
  -- (status = 'running') is no way in, and the run is read per job (a scalar
  -- subquery, never a join the planner could start from). A plan through that index,
  -- or from the active runs, reads every running job and the dead index entries of
  -- every job that ran since the last vacuum (a bitmap scan never marks them dead):
  -- O(elements) per batch for a large expand.
  AND ductline_jobs.status = (SELECT 'running'::text)
  AND ductline_jobs.id = ANY(ARRAY(SELECT job_id FROM jsonb_to_recordset(:items::jsonb) AS i(job_id text)))
  -- a result that arrives after its run was cancelled or failed is dropped
  AND (SELECT r.status FROM ductline_runs r WHERE r.id = ductline_jobs.run_id)
      IN ({UNFINISHED_RUN})
RETURNING ductline_jobs.id AS id;

-- name: close_succeeded_attempts
UPDATE ductline_attempts
SET result = 'succeeded', finished_ms = ductline_now_ms(),
    started_ms = GREATEST(ductline_attempts.started_ms, x.started_ms),  -- as in close_attempt
    deadline_ms = CASE WHEN x.started_ms > ductline_attempts.started_ms THEN x.deadline_ms
                       ELSE ductline_attempts.deadline_ms END
FROM jsonb_to_recordset(:items::jsonb) AS x(job_id text, attempt int, lease_token text, started_ms bigint,
                                            deadline_ms bigint)
WHERE ductline_attempts.job_id = x.job_id AND ductline_attempts.attempt = x.attempt
  AND ductline_attempts.lease_token = x.lease_token AND ductline_attempts.result IS NULL;

-- name: start_runs
-- The earliest claim starts a run (and its deadline); a later one never moves it later.
-- Returns every given run's deadline (one round trip per claim): the runs it started
-- from the update, the others as this statement's snapshot saw them (the claim holds
-- them FOR KEY SHARE, so no stop can change them before commit). A run the snapshot saw
-- pending but did not start was started by a concurrent claim that committed meanwhile:
-- it comes back marked stale and the caller reads it again (run_deadlines).
WITH started AS (
    UPDATE ductline_runs
    SET status = 'running', started_ms = :now_ms,
        deadline_ms = CASE WHEN timeout_seconds IS NULL THEN NULL ELSE :now_ms + timeout_seconds * 1000 END
    WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(:run_ids::jsonb)))
      AND (status = 'pending' OR (status = 'running' AND started_ms > :now_ms))
    RETURNING id, deadline_ms
)
-- A concurrent claim with an earlier clock may still move a seen deadline earlier, but
-- never past this claim's own now + timeout: the deadline returned is bounded by it.
SELECT r.id, CASE WHEN s.id IS NULL
                  THEN LEAST(r.deadline_ms, :now_ms + r.timeout_seconds * 1000)
                  ELSE s.deadline_ms END AS deadline_ms,
       (s.id IS NULL AND r.status = 'pending') AS stale
FROM ductline_runs r LEFT JOIN started s ON s.id = r.id
WHERE r.id = ANY(ARRAY(SELECT jsonb_array_elements_text(:run_ids::jsonb)));

-- name: run_ends
-- The times and end of finished runs, by id (the worker's one log line per run
-- end reads those that ended together in one round trip).
SELECT id, created_ms, started_ms, finished_ms, halt_reason, metadata FROM ductline_runs WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(:run_ids::jsonb)));

-- name: run_deadlines
SELECT id, deadline_ms FROM ductline_runs WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(:run_ids::jsonb)));

-- name: next_wakeups
-- Both of a worker's timers in one round trip: the earliest not-before time of a
-- pending job and the earliest deadline of an active run or expiry of a pause
-- (index lookups): at either, the worker ends what is due (abort.expire_due).
SELECT (SELECT min((SELECT j.not_before_ms FROM ductline_jobs j
                 WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = q.queue
                   AND j.priority = q.priority AND j.phase = q.phase
                   AND j.pipeline = ANY(ARRAY(SELECT jsonb_array_elements_text(:pipelines::jsonb)))
                   AND (:definitions::jsonb IS NULL OR :definitions::jsonb ? j.definition)
                 ORDER BY j.not_before_ms LIMIT 1))
        FROM ductline_ready_queues q
        WHERE :queues::jsonb ? q.queue) AS not_before_ms,
       (SELECT min(due_ms) FROM (
            SELECT min(deadline_ms) AS due_ms FROM ductline_runs
            WHERE status IN ({UNFINISHED_RUN}) AND deadline_ms IS NOT NULL
              AND pipeline IN (SELECT jsonb_array_elements_text(:pipelines::jsonb))
            UNION ALL
            SELECT min(pause_expires_ms) FROM ductline_jobs
            WHERE status = 'paused' AND pause_expires_ms IS NOT NULL
              AND pipeline IN (SELECT jsonb_array_elements_text(:pipelines::jsonb))
            UNION ALL
            SELECT min(pause_expires_ms) FROM ductline_jobs
            WHERE status = 'deferred' AND pause_expires_ms IS NOT NULL
              AND pipeline IN (SELECT jsonb_array_elements_text(:pipelines::jsonb))) AS due) AS deadline_ms;

-- name: stop_run
-- A run deadline, a cancel or an expired pause ends the run (`ductline.model.stops`):
-- only from the statuses the stop applies to, so of two racing stops one wins.
UPDATE ductline_runs
SET status = :status, halt_reason = coalesce(:halt_reason, halt_reason), metadata = :metadata,
    finished_ms = ductline_now_ms()
WHERE id = :run_id AND status IN (SELECT jsonb_array_elements_text(:from_statuses::jsonb));

-- name: lock_runs
-- Taken first by every transaction that records outcomes of a run's attempts, in id
-- order (no deadlocks between workers): a stop of the run waits for it, or it waits
-- for the stop and then sees the run ended. It does not conflict with claims.
SELECT id, status FROM ductline_runs WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(:run_ids::jsonb)))
ORDER BY id FOR NO KEY UPDATE;

-- name: lock_run_for_stop
-- A stop (cancel, run deadline, expired pause) locks the run exclusively first.
SELECT metadata, timeout_seconds, status, deadline_ms FROM ductline_runs WHERE id = :run_id FOR UPDATE;

-- name: lock_running_jobs
-- A stop locks the run's running jobs before it reads the instant that tells which
-- have begun (Tx.take_back_unstarted): a worker's renewal of a held job's lease, sent
-- once the job's time has passed, then either committed before that instant or waits
-- for the stop's commit and finds the lease gone.
SELECT id FROM ductline_jobs WHERE run_id = :run_id AND status = 'running' ORDER BY id FOR UPDATE;

-- name: halt_hold_settle
-- halt_run, hold_jobs and notify_settled in one round trip (Tx.halt_run): the run
-- halts once (an active run only), its pending jobs wait as held, and clients waiting
-- for it hear at commit that it stopped moving. Nothing comes back, and nothing is
-- held or told, when the run was not active (it halted or ended already).
WITH halted AS (
    UPDATE ductline_runs
    SET status = 'halted', halt_reason = :reason, metadata = :metadata, finished_ms = ductline_now_ms()
    WHERE id = :run_id AND status IN ({ACTIVE_RUN})
    RETURNING id, parent_run_id, parent_job_id
), held AS (
    UPDATE ductline_jobs SET status = 'held'
    WHERE run_id = (SELECT id FROM halted) AND status = 'pending'
)
-- Its parent, if it is a child run (Tx.ended_parents: its end may wake that parent).
SELECT id, parent_run_id, parent_job_id, pg_notify('ductline_runs', id) AS notified FROM halted;

-- name: notify_settled
-- Delivered at commit to clients waiting for a run (LISTEN ductline_runs): the run
-- with this id stopped moving (completed, halted, failed, cancelled).
SELECT pg_notify('ductline_runs', :run_id) AS notified;

-- name: complete_runs
-- Complete many runs whose last step completed in one recording transaction, and
-- tell waiting clients at commit (notify_settled for each), in one round trip.
WITH done AS (
    UPDATE ductline_runs SET status = 'completed', output = x.output, finished_ms = ductline_now_ms()
    FROM jsonb_to_recordset(:items::jsonb) AS x(run_id text, output text)
    WHERE ductline_runs.id = x.run_id AND ductline_runs.status = 'running'
    RETURNING ductline_runs.id AS id, parent_run_id, parent_job_id
)
-- Each run's parent, if it is a child run (Tx.ended_parents: its end may wake that parent).
SELECT id, parent_run_id, parent_job_id, pg_notify('ductline_runs', id) AS notified FROM done;

-- name: insert_jobs
-- insert_job for many jobs in one statement (a fan-out's elements, a batch's next
-- steps, trigger_many's first jobs); the same rules row by row.
INSERT INTO ductline_jobs (id, run_id, pipeline, step, scope, parent_scope, elem_index, status, input,
                           not_before_ms, max_retry, max_crash, retry_delay_seconds, timeout_seconds, created_ms,
                           priority, limit_key, phase, queue, definition)
SELECT x.id, x.run_id, x.pipeline, x.step, x.scope, x.parent_scope, x.elem_index,
       CASE WHEN x.status <> 'auto' THEN x.status
            WHEN (SELECT r.status FROM ductline_runs r WHERE r.id = x.run_id) IN ({ACTIVE_RUN})
            THEN 'pending' ELSE 'held' END,
       x.input, coalesce(x.not_before_ms, x.now_ms + x.delay_ms), x.max_retry, x.max_crash,
       x.retry_delay_seconds, x.timeout_seconds, x.now_ms,
       coalesce((SELECT r.priority FROM ductline_runs r WHERE r.id = x.run_id), 0) + x.priority, x.limit_key,
       x.phase, x.queue, x.definition
-- Rows go in the order given (no join to reorder them: the one row of :common is
-- joined to each): of two rows for one step run the first is kept, and not-before
-- times follow the order. A field absent from a row of :items is :common's
-- (Tx.insert_jobs sends the values every row shares once, `shared_fields`).
-- The clock is read once per row (a volatile column keeps the subquery apart): a row's
-- not-before and created times are one instant.
FROM (SELECT coalesce(r.id, c.id) AS id, coalesce(r.run_id, c.run_id) AS run_id,
             coalesce(r.pipeline, c.pipeline) AS pipeline, coalesce(r.step, c.step) AS step,
             coalesce(r.scope, c.scope) AS scope, coalesce(r.parent_scope, c.parent_scope) AS parent_scope,
             coalesce(r.elem_index, c.elem_index) AS elem_index, coalesce(r.status, c.status) AS status,
             coalesce(r.input, c.input) AS input, coalesce(r.not_before_ms, c.not_before_ms) AS not_before_ms,
             coalesce(r.delay_ms, c.delay_ms) AS delay_ms, coalesce(r.max_retry, c.max_retry) AS max_retry,
             coalesce(r.max_crash, c.max_crash) AS max_crash,
             coalesce(r.retry_delay_seconds, c.retry_delay_seconds) AS retry_delay_seconds,
             coalesce(r.timeout_seconds, c.timeout_seconds) AS timeout_seconds,
             coalesce(r.priority, c.priority) AS priority, coalesce(r.limit_key, c.limit_key) AS limit_key,
             coalesce(r.phase, c.phase) AS phase, coalesce(r.queue, c.queue) AS queue,
             coalesce(r.definition, c.definition) AS definition, ductline_now_ms() AS now_ms
      FROM jsonb_to_recordset(:items::jsonb) AS r(id text, run_id text, pipeline text, step text, scope text,
         parent_scope text, elem_index bigint, status text, input text, not_before_ms bigint, delay_ms bigint,
         max_retry bigint, max_crash bigint, retry_delay_seconds bigint, timeout_seconds bigint,
         priority bigint, limit_key text, phase bigint, queue text, definition text)
      CROSS JOIN jsonb_to_record(:common::jsonb) AS c(id text, run_id text, pipeline text, step text, scope text,
         parent_scope text, elem_index bigint, status text, input text, not_before_ms bigint, delay_ms bigint,
         max_retry bigint, max_crash bigint, retry_delay_seconds bigint, timeout_seconds bigint,
         priority bigint, limit_key text, phase bigint, queue text, definition text)) AS x
ON CONFLICT (run_id, step, scope) DO NOTHING;

-- name: insert_runs
-- insert_run for many runs without idempotency keys (trigger_many): one statement.
INSERT INTO ductline_runs (id, pipeline, status, args, timeout_seconds, not_before_ms, created_ms,
                           idempotency_key, priority, definition)
SELECT x.id, x.pipeline, 'pending', x.args, x.timeout_seconds,
       coalesce(x.not_before_ms, x.now_ms + x.delay_ms), x.now_ms, NULL, x.priority, x.definition
FROM (SELECT r.*, ductline_now_ms() AS now_ms
      FROM jsonb_to_recordset(:items::jsonb) AS r(id text, pipeline text, args text, timeout_seconds bigint,
         delay_ms bigint, not_before_ms bigint, priority bigint, definition text)) AS x;

-- name: insert_attempts
-- insert_attempt for every job of a claim in one statement (one round trip).
INSERT INTO ductline_attempts (job_id, attempt, run_id, lease_token, worker_id, started_ms, deadline_ms)
SELECT x.job_id, x.attempt, x.run_id, x.lease_token, x.worker_id, x.started_ms, x.deadline_ms
FROM jsonb_to_recordset(:items::jsonb) AS x(job_id text, attempt bigint, run_id text, lease_token text,
                                            worker_id text, started_ms bigint, deadline_ms bigint);

-- name: claim_start_jobs
-- The claim, start_runs and insert_attempts in one statement (one round trip per
-- claim; Tx.claim takes this path when no limit or oldest-first rule applies).
-- Highest priority first, then jobs of runs under way before first steps (phase), then
-- the oldest not-before (ductline.model.claim_order). SKIP LOCKED lets any number of
-- workers claim side by side. Each (queue, priority, phase) range of the claimable
-- jobs of the served :queues (ductline_ready_queues) is read in not-before order from
-- the ready index, so the claim never scans delayed jobs nor jobs of other queues.
-- :definitions: the definitions the worker loaded (NULL: any).
-- Each picked job's run row is share-locked (FOR KEY SHARE) until commit: a stop of
-- the run (cancel, deadline, expired pause) locks it FOR UPDATE, so it either waits for
-- this claim and then ends the attempt it created, or holds the run first and this
-- claim skips the run's jobs. Completions take a lock that does not conflict with it. The
-- CTEs share one snapshot: a run this statement starts is read from `started`, the
-- others from the snapshot (held FOR KEY SHARE by the pick, so no stop moves them).
-- A run the snapshot saw pending that a concurrent claim started first comes back
-- `stale`: its deadline and its attempts' deadline_ms are read and fixed by the caller.
-- With :gated (the worker serves steps with concurrency or rate limits), a pick that
-- holds a job of a limited step (limit_key set) claims nothing and says so in
-- `limited`: the caller claims through the candidate path, which decides the limits
-- (the picked rows stay locked by this transaction, so that path reads them again).
-- Without a limited job the fused claim serves, whatever limits the worker knows.
-- The result always has one row at least: a row without an id only carries `limited`
-- (and `wake`'s columns, on every row).
-- :horizon_ms > 0: also the jobs that become ready within it (a claim ahead of their
-- time, ductline.store.claims), always :gated: a limited job among them is left to the
-- candidate path, which takes only unlimited ones then; 0: ready jobs only.
WITH picked AS (
    SELECT c.id, c.limit_key FROM ductline_ready_queues queues CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.phase, j.not_before_ms, j.limit_key
        FROM ductline_jobs j JOIN ductline_runs r ON r.id = j.run_id
        WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = queues.queue
          AND j.priority = queues.priority
          AND j.phase = queues.phase AND j.not_before_ms <= (SELECT ductline_now_ms()) + :horizon_ms
          AND :pipelines::jsonb ? j.pipeline
          AND (:definitions::jsonb IS NULL OR :definitions::jsonb ? j.definition)
        ORDER BY j.not_before_ms
        LIMIT :limit
        FOR UPDATE OF j SKIP LOCKED FOR KEY SHARE OF r SKIP LOCKED
    ) c
    WHERE :queues::jsonb ? queues.queue
    ORDER BY c.priority DESC, c.phase, c.not_before_ms
    LIMIT :limit
), gate AS (
    SELECT NOT (:gated::boolean AND EXISTS (SELECT 1 FROM picked WHERE limit_key IS NOT NULL)) AS open
), claimed AS (
    UPDATE ductline_jobs AS j
    SET status = 'running', attempts = j.attempts + 1, lease_token = gen_random_uuid()::text,
        lease_expires_ms = ductline_now_ms() + :lease_ms, worker_id = :worker_id
    -- By id (an index lookup per job): a join with `picked` may be planned as a scan
    -- of every job, which costs more than the claim while thousands wait.
    WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND (SELECT open FROM gate)
    RETURNING j.id, j.run_id, j.pipeline, j.step, j.scope, j.input, j.attempts, j.lease_token,
              j.timeout_seconds, j.boundary, j.not_before_ms, j.limit_key, j.priority, j.phase,
              ductline_now_ms() AS claimed_ms
), first AS (
    SELECT min(claimed_ms) AS now_ms FROM claimed
), started AS (
    UPDATE ductline_runs
    -- (a NULL timeout_seconds makes a NULL deadline_ms)
    SET status = 'running', started_ms = (SELECT now_ms FROM first),
        deadline_ms = (SELECT now_ms FROM first) + timeout_seconds * 1000
    -- Looked up by id (the CASE is no index condition: the planner would otherwise
    -- read the runs by status, i.e. every pending and running run).
    WHERE id = ANY(ARRAY(SELECT run_id FROM claimed))
      AND CASE status WHEN 'pending' THEN true
                      WHEN 'running' THEN started_ms > (SELECT now_ms FROM first) ELSE false END
    RETURNING id, deadline_ms
), runs AS (
    SELECT r.id, CASE WHEN s.id IS NULL
                      THEN LEAST(r.deadline_ms, (SELECT now_ms FROM first) + r.timeout_seconds * 1000)
                      ELSE s.deadline_ms END AS deadline_ms,
           (s.id IS NULL AND r.status = 'pending') AS stale
    FROM ductline_runs r LEFT JOIN started s ON s.id = r.id
    WHERE r.id = ANY(ARRAY(SELECT run_id FROM claimed))
), rows AS (
    -- LEAST ignores NULLs: the earlier of the step's and the run's deadline, if any;
    -- the step's counts from the attempt's start (below), not from a claim made early.
    SELECT c.*, runs.deadline_ms AS run_deadline_ms, runs.stale,
           LEAST(GREATEST(c.claimed_ms, c.not_before_ms) + c.timeout_seconds * 1000, runs.deadline_ms) AS deadline_ms
    FROM claimed c JOIN runs ON runs.id = c.run_id
), attempts AS (
    -- A job claimed before its not-before time begins no earlier: that time is its
    -- attempt's start until the attempt ends (as _start_claimed writes it).
    INSERT INTO ductline_attempts (job_id, attempt, run_id, lease_token, worker_id, started_ms, deadline_ms)
    SELECT id, attempts, run_id, lease_token, :worker_id, GREATEST(claimed_ms, not_before_ms), deadline_ms
    FROM rows
), wake AS (
    -- A claim that found fewer jobs than it asked for also says when to wake next
    -- (next_wakeups, as the state after this claim: the jobs it claimed are no longer
    -- pending, the runs it started have their deadlines), saving that round trip.
    -- Read only then (a CASE evaluates the branch it takes).
    SELECT CASE WHEN (SELECT count(*) FROM claimed) < :limit THEN
               (SELECT min((SELECT j.not_before_ms FROM ductline_jobs j
                            WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = q.queue
                              AND j.priority = q.priority AND j.phase = q.phase
                              AND :pipelines::jsonb ? j.pipeline
                              AND (:definitions::jsonb IS NULL OR :definitions::jsonb ? j.definition)
                              AND j.id <> ALL(ARRAY(SELECT id FROM claimed))
                            ORDER BY j.not_before_ms LIMIT 1))
                FROM ductline_ready_queues q
                WHERE :queues::jsonb ? q.queue) END
               AS next_not_before_ms,
           CASE WHEN (SELECT count(*) FROM claimed) < :limit THEN
               (SELECT min(due_ms) FROM (
                    SELECT min(deadline_ms) AS due_ms FROM ductline_runs
                    WHERE status IN ({UNFINISHED_RUN}) AND deadline_ms IS NOT NULL
                      AND pipeline IN (SELECT jsonb_array_elements_text(:pipelines::jsonb))
                    UNION ALL
                    SELECT min(deadline_ms) FROM started
                    UNION ALL
                    SELECT min(pause_expires_ms) FROM ductline_jobs
                    WHERE status = 'paused' AND pause_expires_ms IS NOT NULL
                      AND pipeline IN (SELECT jsonb_array_elements_text(:pipelines::jsonb))
                    UNION ALL
                    SELECT min(pause_expires_ms) FROM ductline_jobs
                    WHERE status = 'deferred' AND pause_expires_ms IS NOT NULL
                      AND pipeline IN (SELECT jsonb_array_elements_text(:pipelines::jsonb))) AS due) END
               AS next_deadline_ms,
           (SELECT count(*) FROM claimed) < :limit AS ran_dry
)
SELECT rows.*, NOT gate.open AS limited, wake.* FROM gate CROSS JOIN wake LEFT JOIN rows ON true
ORDER BY rows.priority DESC, rows.phase, rows.not_before_ms;

-- name: complete_close_jobs
-- lock_runs, complete_jobs and close_succeeded_attempts in one statement (one round
-- trip per batch of successes); returns the job ids whose lease was still held.
-- The runs of :run_ids are locked first, in id order, as lock_runs does: `done` reads
-- the count of `locked` in a condition without a column of its own (evaluated once,
-- before any job row is updated). A stop that held a run meanwhile has ended that
-- run's running jobs when it committed: their updated rows are checked again under
-- READ COMMITTED and no longer match status = 'running'.
WITH locked AS (
    SELECT id FROM ductline_runs
    WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(:run_ids::jsonb)))
    ORDER BY id FOR NO KEY UPDATE
), done AS (
    UPDATE ductline_jobs
    SET status = 'completed', output = x.output, lease_token = NULL, lease_expires_ms = NULL,
        finished_ms = ductline_now_ms()
    FROM jsonb_to_recordset(:items::jsonb) AS x(job_id text, lease_token text, output text)
    WHERE (SELECT count(*) FROM locked) >= 0
      AND ductline_jobs.id = x.job_id AND ductline_jobs.lease_token = x.lease_token
      -- By id, the status no index condition, the run read per job: see complete_jobs.
      AND ductline_jobs.status = (SELECT 'running'::text)
      AND ductline_jobs.id = ANY(ARRAY(SELECT job_id FROM jsonb_to_recordset(:items::jsonb) AS i(job_id text)))
      -- a result that arrives after its run was cancelled or failed is dropped
      AND (SELECT r.status FROM ductline_runs r WHERE r.id = ductline_jobs.run_id)
          IN ({UNFINISHED_RUN})
    RETURNING ductline_jobs.id AS id, x.lease_token
), closed AS (
    UPDATE ductline_attempts
    SET result = 'succeeded', finished_ms = ductline_now_ms(),
        started_ms = GREATEST(ductline_attempts.started_ms, x.started_ms),  -- as in close_attempt
        deadline_ms = CASE WHEN x.started_ms > ductline_attempts.started_ms THEN x.deadline_ms
                           ELSE ductline_attempts.deadline_ms END
    FROM jsonb_to_recordset(:items::jsonb) AS x(job_id text, attempt int, lease_token text, started_ms bigint,
                                                deadline_ms bigint),
         done
    WHERE done.id = x.job_id AND done.lease_token = x.lease_token
      AND ductline_attempts.job_id = x.job_id AND ductline_attempts.attempt = x.attempt
      AND ductline_attempts.lease_token = x.lease_token AND ductline_attempts.result IS NULL
)
SELECT id FROM done;

-- name: context_lease
-- A step's context write goes on only while its attempt holds the lease (fencing).
-- The job row is share-locked until the write commits: a cancel (which takes the lease
-- by updating it) waits for the write, or the write waits for the cancel and, reading
-- the row again, finds the lease gone; a prune skips a run with a locked job (prune_busy).
SELECT 1 AS held FROM ductline_jobs j
WHERE j.id = :job_id::text AND j.run_id = :run_id::text AND j.lease_token = :lease_token::text
  AND j.status = 'running'
  AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = j.run_id AND r.status IN ({UNFINISHED_RUN}))
FOR SHARE OF j;
