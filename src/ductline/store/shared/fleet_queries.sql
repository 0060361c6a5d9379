-- Statements of queues and definition versions (ductline.store.fleet).

-- name: live_offers
-- What each live worker claims (queues and definition fingerprints, JSON lists): a
-- worker is live while its status says so and its heartbeat is younger than
-- :max_age_ms.
SELECT id, queues, definitions FROM ductline_workers
WHERE status IN ({LIVE_WORKER}) AND heartbeat_ms >= ductline_now_ms() - :max_age_ms;

-- name: ready_per_queue
-- Pending jobs ready to claim, per queue (one aggregate over the pending jobs).
SELECT queue, count(*) AS ready FROM ductline_jobs
WHERE status = 'pending' AND throttled = 0 AND not_before_ms <= ductline_now_ms()
GROUP BY queue ORDER BY queue;

-- name: get_definition
SELECT fingerprint, pipeline, steps, queues, created_ms FROM ductline_definitions
WHERE fingerprint = :fingerprint;

-- name: find_definitions
-- Definitions whose fingerprint starts with :prefix (what people type is its first digits).
SELECT fingerprint, pipeline, steps, queues, created_ms FROM ductline_definitions
WHERE fingerprint LIKE :pattern ORDER BY fingerprint LIMIT 10;

-- name: list_definitions
SELECT fingerprint, pipeline, steps, queues, created_ms FROM ductline_definitions
ORDER BY pipeline, created_ms;

-- name: runs_of_definitions
-- Runs of the definitions whose fingerprint is LIKE :pattern, newest first.
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms, definition
FROM ductline_runs WHERE definition LIKE :pattern
  AND (CAST(:status AS TEXT) IS NULL OR status = :status)
  AND (CAST(:pipeline AS TEXT) IS NULL OR pipeline = :pipeline)
ORDER BY created_ms DESC, id DESC LIMIT :limit;

-- name: runs_to_move
-- Unfinished runs of one definition of a pipeline, oldest first (a batch of a move).
SELECT id FROM ductline_runs
WHERE pipeline = :pipeline AND definition = :definition AND status IN ({UNFINISHED_RUN})
  AND (CAST(:run_id AS TEXT) IS NULL OR id = :run_id)
ORDER BY created_ms, id LIMIT :limit;

-- name: jobs_to_move
SELECT id, step, status FROM ductline_jobs WHERE run_id = :run_id;

-- name: move_job
-- A job of a moved run: its step in the target definition, that step's queue (kept
-- when the target lacks the step: a finished job), and the target's fingerprint.
UPDATE ductline_jobs
SET step = :step, queue = CASE WHEN :queue = '' THEN queue ELSE :queue END, definition = :definition
WHERE id = :id;

-- name: rename_fanin
UPDATE ductline_fanins SET step = :new_step WHERE run_id = :run_id AND step = :old_step;

-- name: move_run
-- Fenced by the definition the move read: a run moved meanwhile changes nothing.
UPDATE ductline_runs SET definition = :definition, metadata = :metadata
WHERE id = :run_id AND definition = :from_definition;

-- name: run_definitions_like
-- The fingerprints unfinished runs of a pipeline follow that are LIKE :pattern (a
-- source of a move that no worker recorded: triggered by code no worker loaded).
SELECT DISTINCT definition FROM ductline_runs
WHERE pipeline = :pipeline AND definition LIKE :pattern AND status IN ({UNFINISHED_RUN})
ORDER BY definition LIMIT 10;
