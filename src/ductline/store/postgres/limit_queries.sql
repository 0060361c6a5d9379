-- Claims that enforce concurrency and rate limits, and priorities' starvation bound.
-- A worker serving a limited step picks candidates (locked, not yet claimed), takes
-- each limit key's lock, counts and admits, then claims the admitted ones by id.

-- name: ready_queues
-- The (queue, priority, phase) ranges of the served :queues holding ready jobs, in
-- claim order (SQLite claims range by range): one index lookup each.
SELECT q.queue, q.priority, q.phase FROM ductline_ready_queues q
WHERE :queues::jsonb ? q.queue
  AND EXISTS (SELECT 1 FROM ductline_jobs j
              WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = q.queue AND j.priority = q.priority
                AND j.phase = q.phase AND j.not_before_ms <= (SELECT ductline_now_ms()) + :horizon_ms
                AND (:horizon_ms = 0 OR j.limit_key IS NULL))
ORDER BY q.priority DESC, q.phase, q.queue;

-- name: claim_candidates
-- The rows claim_jobs would take, locked but not claimed, from every served queue at
-- once: :queue, :priority and :phase are unused here. :horizon_ms > 0: with the jobs
-- of unlimited steps ready within it (a claim ahead of their time, ductline.store.claims).
SELECT c.id, c.limit_key, c.pipeline, c.step, c.rate_slot_ms, c.not_before_ms
FROM ductline_ready_queues queues CROSS JOIN LATERAL (
    -- The runs are share-locked as claim_jobs does (a stop waits, or is skipped).
    SELECT j.id, j.priority, j.phase, j.not_before_ms, j.limit_key, j.pipeline, j.step, j.rate_slot_ms
    FROM ductline_jobs j JOIN ductline_runs r ON r.id = j.run_id
    WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = queues.queue AND j.priority = queues.priority
      AND j.phase = queues.phase AND j.not_before_ms <= (SELECT ductline_now_ms()) + :horizon_ms
      AND (:horizon_ms = 0 OR j.limit_key IS NULL)
      AND j.pipeline IN (SELECT jsonb_array_elements_text(:pipelines::jsonb))
      AND (:definitions::jsonb IS NULL OR :definitions::jsonb ? j.definition)
    ORDER BY j.not_before_ms
    LIMIT :limit
    FOR UPDATE OF j SKIP LOCKED FOR KEY SHARE OF r SKIP LOCKED
) c
WHERE :queues::jsonb ? queues.queue
ORDER BY c.priority DESC, c.phase, c.not_before_ms
LIMIT :limit;

-- name: claim_candidates_fifo
-- Oldest not-before first whatever the priority and phase: the claim that bounds
-- starvation. Each queue gives its oldest; the oldest of those are taken. :queue,
-- :priority and :phase are unused.
SELECT c.id, c.limit_key, c.pipeline, c.step, c.rate_slot_ms, c.not_before_ms
FROM ductline_ready_queues queues CROSS JOIN LATERAL (
    -- The runs are share-locked as claim_jobs does (a stop waits, or is skipped).
    SELECT j.id, j.not_before_ms, j.limit_key, j.pipeline, j.step, j.rate_slot_ms FROM ductline_jobs j JOIN ductline_runs r ON r.id = j.run_id
    WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = queues.queue AND j.priority = queues.priority
      AND j.phase = queues.phase AND j.not_before_ms <= (SELECT ductline_now_ms())
      AND j.pipeline IN (SELECT jsonb_array_elements_text(:pipelines::jsonb))
      AND (:definitions::jsonb IS NULL OR :definitions::jsonb ? j.definition)
    ORDER BY j.not_before_ms
    LIMIT :limit
    FOR UPDATE OF j SKIP LOCKED FOR KEY SHARE OF r SKIP LOCKED
) c
WHERE :queues::jsonb ? queues.queue
ORDER BY c.not_before_ms
LIMIT :limit;

-- name: claim_by_ids
-- :now_ms is the clock the admission read in this transaction, so a rate limit's
-- spacing holds between the recorded attempt starts.
UPDATE ductline_jobs AS j
SET status = 'running', attempts = j.attempts + 1, lease_token = gen_random_uuid()::text,
    lease_expires_ms = :now_ms + :lease_ms, worker_id = :worker_id, rate_slot_ms = NULL
WHERE j.id = ANY(ARRAY(SELECT jsonb_array_elements_text(:ids::jsonb))) AND j.status = 'pending'
RETURNING j.id, j.run_id, j.pipeline, j.step, j.scope, j.input, j.attempts, j.lease_token,
          j.timeout_seconds, j.boundary, j.not_before_ms, j.limit_key, j.priority, j.phase, :now_ms AS claimed_ms;

-- name: lock_limit_keys
-- Held to commit: claims and hand-overs of one limit key take turns across all hosts.
-- Keys are locked in sorted order, so two transactions cannot deadlock.
SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) AS locked
FROM (SELECT k FROM jsonb_array_elements_text(:keys::jsonb) AS k ORDER BY k) AS sorted;

-- name: running_with_keys
-- Slots held per key: running attempts, and attempts of a cancelled or expired run
-- whose worker has not yet killed them (their lease expiry is kept until it has).
-- Read after the keys were locked (a statement of its own: it must see what committed
-- while this transaction waited for the locks).
SELECT limit_key, count(*) AS n FROM ductline_jobs
WHERE limit_key IS NOT NULL AND lease_expires_ms IS NOT NULL AND limit_key IN (SELECT jsonb_array_elements_text(:keys::jsonb))
  AND (status = 'running' OR lease_expires_ms > ductline_now_ms())
GROUP BY limit_key;

-- name: rate_last_starts
SELECT limit_key, last_start_ms FROM ductline_rate_slots WHERE limit_key IN (SELECT jsonb_array_elements_text(:keys::jsonb));

-- name: rate_reserved_slots
-- The last start slot held by a waiting job of each key: the next free slot follows it.
SELECT limit_key, max(rate_slot_ms) AS reserved_ms FROM ductline_jobs
WHERE status = 'pending' AND rate_slot_ms IS NOT NULL AND limit_key IN (SELECT jsonb_array_elements_text(:keys::jsonb))
GROUP BY limit_key;

-- name: release_slots
-- The worker killed these attempts after their run was cancelled or expired: their
-- slots are free (nothing is released while a job is still running).
UPDATE ductline_jobs SET lease_expires_ms = NULL
WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(:ids::jsonb))) AND status <> 'running' AND lease_expires_ms IS NOT NULL;

-- name: throttle_jobs
-- Jobs whose key is at capacity leave the ready index until a slot frees.
UPDATE ductline_jobs SET throttled = 1
WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text(:ids::jsonb))) AND status = 'pending';

-- name: unthrottle_idle_keys
-- Safety net run by maintenance: throttled jobs of a key holding no slot (freed by a
-- path that does not hand it on, e.g. a rescue or a lease run out) become ready again.
UPDATE ductline_jobs AS t SET throttled = 0
WHERE t.throttled = 1 AND t.status = 'pending'
  AND NOT EXISTS (SELECT 1 FROM ductline_jobs r
                  WHERE r.limit_key = t.limit_key AND r.limit_key IS NOT NULL
                    AND r.lease_expires_ms IS NOT NULL
                    AND (r.status = 'running' OR r.lease_expires_ms > ductline_now_ms()));
