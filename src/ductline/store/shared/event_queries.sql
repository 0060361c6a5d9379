-- Events (`.wait_for(event, before=step)`, ductline.engine.events): a step run that
-- waits for an event is one job row with status 'deferred' (no slot, no lease) and
-- the event's name in wait_event; its expiry, if the wait has a timeout, is in
-- pause_expires_ms. An event sent to a run is a row of ductline_events, kept until
-- a wait of that run consumes it (job_id, consumed_ms), once.

-- name: defer_job
-- Runs right after insert_jobs stored the job 'deferred', in the same transaction.
UPDATE ductline_jobs SET wait_event = :event, pause_expires_ms = :expires_ms
WHERE id = :job_id AND status = 'deferred';

-- name: insert_event
-- A second send with the same key to the same run stores nothing (0 rows). The
-- sender holds the run's lock (lock_runs), so the run's next seq is its own.
INSERT INTO ductline_events (id, run_id, seq, name, key, data, sent_ms)
SELECT :id, :run_id, coalesce(max(seq), 0) + 1, :name, :key, :data, ductline_now_ms()
FROM ductline_events WHERE run_id = :run_id
ON CONFLICT DO NOTHING;

-- name: event_by_key
SELECT id, name, sent_ms, job_id, consumed_ms FROM ductline_events WHERE run_id = :run_id AND key = :key;

-- name: kept_event
-- The oldest event of this name the run has not consumed yet.
SELECT id, data FROM ductline_events
WHERE run_id = :run_id AND name = :name AND consumed_ms IS NULL
ORDER BY seq
LIMIT 1;

-- name: count_kept_events
-- The run's events no wait has consumed yet (ductline_events_order narrows to the run).
SELECT count(*) AS n FROM ductline_events WHERE run_id = :run_id AND consumed_ms IS NULL;

-- name: consume_event
UPDATE ductline_events SET job_id = :job_id, consumed_ms = ductline_now_ms()
WHERE id = :id AND consumed_ms IS NULL;

-- name: awaiting_job
-- The step run of this run waiting for this event (a wait that timed out is not
-- released: it fails closed).
SELECT id, step, scope FROM ductline_jobs
WHERE run_id = :run_id AND status = 'deferred' AND wait_event = :name
  AND (pause_expires_ms IS NULL OR pause_expires_ms > ductline_now_ms())
ORDER BY created_ms, id
LIMIT 1;

-- name: release_deferred_job
-- The event came: ready now (or at the end of the step's own delay, if later), with
-- the event's data as its input; fenced on status and expiry as resume_jobs is.
UPDATE ductline_jobs
SET status = :status, input = :input,
    not_before_ms = CASE WHEN not_before_ms > ductline_now_ms() THEN not_before_ms ELSE ductline_now_ms() END
WHERE id = :job_id AND status = 'deferred'
  AND (pause_expires_ms IS NULL OR pause_expires_ms > ductline_now_ms());

-- name: expired_waits
-- The partial index ductline_jobs_deferred (pause_expires_ms) WHERE status = 'deferred'.
SELECT id, run_id, pipeline, step, scope, wait_event, pause_expires_ms, created_ms FROM ductline_jobs
WHERE status = 'deferred' AND pause_expires_ms <= (SELECT ductline_now_ms())
ORDER BY pause_expires_ms
LIMIT :limit;

-- name: expire_deferred_job
UPDATE ductline_jobs
SET status = 'failed', skip_reason = :reason, finished_ms = ductline_now_ms()
WHERE id = :job_id AND status = 'deferred' AND pause_expires_ms <= ductline_now_ms();

-- name: run_events
SELECT id, name, key, data, sent_ms, job_id, consumed_ms FROM ductline_events
WHERE run_id = :run_id ORDER BY seq;

-- name: metrics_event_waits
-- Step runs waiting for an event per pipeline (the partial index of deferred jobs).
SELECT pipeline, count(*) AS n FROM ductline_jobs WHERE status = 'deferred' GROUP BY pipeline ORDER BY pipeline;
