-- Named statements both dialects run as written (loaded by SQLite and PostgreSQL
-- alike); each dialect's queries.sql holds the ones it writes its own way.
-- ductline_now_ms() is the database clock: SQLite's loader expands it to its own
-- millisecond time (read once per statement), PostgreSQL's reads clock_timestamp().
-- A set of statuses is never spelled out: {UNFINISHED_RUN} and the like are the sets
-- of ductline.model.states, rendered as quoted literals when the statements load.

-- name: schema_version
SELECT max(version) AS version FROM ductline_schema_version;

-- name: set_schema_version
INSERT INTO ductline_schema_version (version) VALUES (:version);

-- name: now
SELECT ductline_now_ms() AS now_ms;

-- name: active_run_by_key
SELECT id FROM ductline_runs
WHERE pipeline = :pipeline AND idempotency_key = :idempotency_key
  AND status IN ({UNFINISHED_RUN});

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

-- name: complete_job
UPDATE ductline_jobs
SET status = 'completed', output = :output, lease_token = NULL, lease_expires_ms = NULL,
    finished_ms = ductline_now_ms()
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running'
  AND EXISTS (SELECT 1 FROM ductline_runs r WHERE r.id = ductline_jobs.run_id
                 AND r.status IN ({UNFINISHED_RUN}));

-- name: retry_job
-- A job re-queued goes back to waiting: pending while its run is active ({ACTIVE_RUN}),
-- held once the run halted, so nothing new starts until a retry
-- (ductline.model.states.waiting_status).
UPDATE ductline_jobs
SET status = CASE WHEN (SELECT r.status FROM ductline_runs r WHERE r.id = ductline_jobs.run_id) IN ({ACTIVE_RUN})
                  THEN 'pending' ELSE 'held' END, failures = failures + :failed, crashes = crashes + :crashed,
    not_before_ms = ductline_now_ms() + :delay_ms, lease_token = NULL, lease_expires_ms = NULL,
    worker_id = NULL, releases = 0
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running';

-- name: fail_job
UPDATE ductline_jobs
SET status = 'failed', failures = failures + :failed, crashes = crashes + :crashed,
    releases = releases + :released, lease_token = NULL, lease_expires_ms = NULL, finished_ms = ductline_now_ms()
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running';

-- name: job_budget
SELECT failures, crashes, max_retry, max_crash, retry_delay_seconds, boundary, run_id, step, pipeline,
       status, lease_token, releases
FROM ductline_jobs WHERE id = :job_id;

-- name: mark_boundary
UPDATE ductline_jobs SET boundary = :boundary
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running';

-- name: run_state
SELECT status FROM ductline_runs WHERE id = :run_id;

-- name: halt_run
UPDATE ductline_runs
SET status = 'halted', halt_reason = :reason, metadata = :metadata, finished_ms = ductline_now_ms()
WHERE id = :run_id AND status IN ({ACTIVE_RUN});

-- name: hold_jobs
UPDATE ductline_jobs SET status = 'held' WHERE run_id = :run_id AND status = 'pending';

-- name: complete_run
UPDATE ductline_runs SET status = 'completed', output = :output, finished_ms = ductline_now_ms()
WHERE id = :run_id AND status = 'running';

-- name: create_fanin
INSERT INTO ductline_fanins (run_id, step, scope, expected, arrived)
VALUES (:run_id, :step, :scope, :expected, 0)
ON CONFLICT (run_id, step, scope) DO NOTHING;

-- name: gather_elements
SELECT elem_index, output FROM ductline_jobs
WHERE run_id = :run_id AND step = :step AND parent_scope = :parent_scope AND status = 'completed'
ORDER BY elem_index;

-- name: release_job
-- Given back uncharged, to waiting as in retry_job (held if its run halted meanwhile);
-- :counted adds one to its consecutive releases (ductline.model.outcomes.MAX_RELEASES).
-- A job claimed before its not-before time (ductline.runtime.claimer) keeps that time:
-- given back early, it must not become ready at once.
UPDATE ductline_jobs
SET status = CASE WHEN (SELECT r.status FROM ductline_runs r WHERE r.id = ductline_jobs.run_id) IN ({ACTIVE_RUN})
                  THEN 'pending' ELSE 'held' END,
    not_before_ms = CASE WHEN not_before_ms > ductline_now_ms() THEN not_before_ms ELSE ductline_now_ms() END,
    lease_token = NULL, lease_expires_ms = NULL,
    worker_id = NULL, releases = releases + :counted
WHERE id = :job_id AND lease_token = :lease_token AND status = 'running';

-- name: context_get
SELECT value FROM ductline_context WHERE run_id = :run_id AND key = :key;

-- name: context_insert
INSERT INTO ductline_context (run_id, key, value) VALUES (:run_id, :key, :value)
ON CONFLICT (run_id, key) DO NOTHING;

-- name: context_upsert
INSERT INTO ductline_context (run_id, key, value) VALUES (:run_id, :key, :value)
ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value;

-- name: upsert_worker
-- :queues and :definitions: JSON lists of what the worker claims (queue names,
-- definition fingerprints), read by `ductline show`, the dashboard and the metrics.
INSERT INTO ductline_workers (id, host, pid, concurrency, busy, undead, status, started_ms, heartbeat_ms,
                              queues, definitions)
VALUES (:id, :host, :pid, :concurrency, 0, 0, 'running', ductline_now_ms(), ductline_now_ms(),
        :queues, :definitions)
ON CONFLICT (id) DO UPDATE SET heartbeat_ms = ductline_now_ms(), status = 'running', problem = NULL,
                               queues = excluded.queues, definitions = excluded.definitions;

-- name: insert_definition
-- A definition a worker loaded: its steps (a JSON list of names) and queues. A
-- fingerprint names one graph, so the first row written stays.
INSERT INTO ductline_definitions (fingerprint, pipeline, steps, queues, created_ms)
VALUES (:fingerprint, :pipeline, :steps, :queues, ductline_now_ms())
ON CONFLICT (fingerprint) DO NOTHING;

-- name: worker_heartbeat
-- :problem: why the worker is unhealthy in its own words (`ductline.model.workers.condition`), or NULL.
UPDATE ductline_workers SET heartbeat_ms = ductline_now_ms(), busy = :busy, undead = :undead, status = :status,
                            problem = :problem
WHERE id = :id
RETURNING heartbeat_ms AS now_ms;

-- name: list_workers
SELECT id, host, pid, concurrency, busy, undead, status, started_ms, heartbeat_ms, queues, problem,
       ductline_now_ms() AS now_ms
FROM ductline_workers ORDER BY started_ms DESC LIMIT :limit;

-- name: list_workers_within
SELECT id, host, pid, concurrency, busy, undead, status, started_ms, heartbeat_ms, queues, problem,
       ductline_now_ms() AS now_ms
FROM ductline_workers WHERE heartbeat_ms >= ductline_now_ms() - :within_ms
ORDER BY started_ms DESC LIMIT :limit;

-- name: get_run
SELECT id, pipeline, status, args, output, halt_reason, metadata, timeout_seconds, deadline_ms,
       not_before_ms, created_ms, started_ms, finished_ms, idempotency_key, priority, definition
FROM ductline_runs WHERE id = :run_id;

-- name: run_jobs
SELECT id, step, scope, parent_scope, elem_index, status, output, not_before_ms, attempts, failures,
       crashes, max_retry, max_crash, boundary, skip_reason, skip_root, created_ms, finished_ms,
       pause_expires_ms, priority, limit_key, throttled, wait_event, queue, definition
FROM ductline_jobs WHERE run_id = :run_id
-- The step runs created together (an expand's elements: one step, one enclosing scope)
-- stay together in element order, the groups as they were created: not by each row's
-- own created_ms, which a worker taking the first elements as they are created
-- (handed over) makes a millisecond or more later than the rest's
-- (ductline.views.in_run_order orders the views the same way).
ORDER BY min(created_ms) OVER (PARTITION BY step, parent_scope), step, parent_scope,
         coalesce(elem_index, -1), scope;

-- name: run_attempts
SELECT job_id, attempt, result, started_ms, deadline_ms, finished_ms, error_type, error, traceback, worker_id
FROM ductline_attempts WHERE run_id = :run_id ORDER BY job_id, attempt;

-- name: get_attempt
-- One attempt by its primary key (a driver looking up what was recorded of its own).
SELECT job_id, attempt, result, started_ms, deadline_ms, finished_ms, error_type, error, traceback, worker_id
FROM ductline_attempts WHERE job_id = :job_id AND attempt = :attempt;

-- name: run_progress
SELECT status, count(*) AS n FROM ductline_jobs WHERE run_id = :run_id GROUP BY status;

-- name: run_progress_reasons
-- A run's step runs counted by status and skip reason (a progress display tells the
-- step runs a stop ended from those that got to an end: ductline.model.stops).
SELECT status, skip_reason, count(*) AS n FROM ductline_jobs WHERE run_id = :run_id GROUP BY status, skip_reason;

-- name: lease_state
SELECT status, lease_token FROM ductline_jobs WHERE id = :job_id;

-- name: running_steps
SELECT DISTINCT step FROM ductline_jobs WHERE run_id = :run_id AND status = 'running' ORDER BY step;

-- name: open_jobs
SELECT id, step, scope, status FROM ductline_jobs
WHERE run_id = :run_id AND status IN ({OPEN_JOB});

-- name: drop_unstarted_attempts
-- What a stop does first (ductline.model.stops.begun_by): the run's running jobs whose
-- attempt never began are taken back -- claimed before their not-before time, which
-- is after :at_ms, the stop's instant (a worker starts a job only once the database
-- clock has surely passed that time), or the job whose worker says it did not start
-- it (:lease_token, else NULL). Their open attempts are removed, as if never claimed.
DELETE FROM ductline_attempts
WHERE run_id = :run_id AND result IS NULL
  AND EXISTS (SELECT 1 FROM ductline_jobs j WHERE j.id = ductline_attempts.job_id
                 AND j.status = 'running' AND j.lease_token = ductline_attempts.lease_token
                 AND j.limit_key IS NULL AND (j.not_before_ms > :at_ms OR j.lease_token = :lease_token));

-- name: take_back_unstarted_jobs
-- Then their jobs go back to waiting, as release_job gives a job back (pending in an
-- active run, else held), without the attempt they never began: the stop treats them
-- as waiting jobs. Only jobs of steps without limits are taken back (none other is
-- claimed before its time, ductline.store.claims): a limited job's slot is handed on
-- when its attempt ends, which a job taken back never has.
UPDATE ductline_jobs
SET status = CASE WHEN (SELECT r.status FROM ductline_runs r WHERE r.id = ductline_jobs.run_id) IN ({ACTIVE_RUN})
                  THEN 'pending' ELSE 'held' END,
    attempts = attempts - 1, lease_token = NULL, lease_expires_ms = NULL, worker_id = NULL
WHERE run_id = :run_id AND status = 'running' AND limit_key IS NULL
  AND (not_before_ms > :at_ms OR lease_token = :lease_token);

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
-- A job awaiting its child runs keeps what it started as its output until then.
UPDATE ductline_jobs
SET status = 'skipped', skip_reason = :reason, skip_root = :root, finished_ms = ductline_now_ms(), output = NULL
WHERE run_id = :run_id AND status IN ({IDLE_JOB});

-- name: due_deadlines
-- Runs past their deadline: a halted run too (ductline.model.stops.deadline ends it).
-- The clock in a scalar subquery: PostgreSQL reads its (volatile) ductline_now_ms()
-- once there, as an index bound, rather than once per row; SQLite reads 'now' once
-- per statement either way.
SELECT id, pipeline, timeout_seconds, metadata, definition FROM ductline_runs
WHERE status IN ({UNFINISHED_RUN}) AND deadline_ms <= (SELECT ductline_now_ms())
ORDER BY deadline_ms
LIMIT :limit;

-- name: run_metadata
SELECT metadata, timeout_seconds, status FROM ductline_runs WHERE id = :run_id;

-- name: set_attempt_deadline
UPDATE ductline_attempts SET deadline_ms = :deadline_ms
WHERE job_id = :job_id AND attempt = :attempt AND lease_token = :lease_token AND result IS NULL;

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

-- name: orphaned_runs
-- Runs that ended (cancelled, failed) while one of their jobs was being claimed:
-- the claim committed after the cancel looked. Maintenance finishes those jobs.
SELECT DISTINCT j.run_id, r.status FROM ductline_jobs j JOIN ductline_runs r ON r.id = j.run_id
WHERE j.status IN ({OPEN_JOB}) AND r.status IN ({STOPPED_RUN})
LIMIT :limit;

-- name: runs_with_prefix
SELECT id FROM ductline_runs WHERE id >= :prefix AND id < :upper ORDER BY id LIMIT 5;
