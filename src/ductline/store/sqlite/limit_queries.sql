-- Claims that enforce concurrency and rate limits, and priorities' starvation bound.
-- SQLite serialises writers (BEGIN IMMEDIATE): counting and admitting inside the
-- claim's transaction needs no further lock.

-- name: ready_queues
-- The (queue, priority, phase) ranges of the served :queues holding ready jobs, in
-- claim order (highest priority first, then jobs of runs under way before first
-- steps): a few index lookups per level.
SELECT q.queue, q.priority, q.phase FROM ductline_ready_queues q
WHERE q.queue IN (SELECT value FROM json_each(:queues))
  AND EXISTS (SELECT 1 FROM ductline_jobs j
              WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = q.queue AND j.priority = q.priority
                AND j.phase = q.phase AND j.not_before_ms <= ductline_now_ms() + :horizon_ms
                AND (:horizon_ms = 0 OR j.limit_key IS NULL))
ORDER BY q.priority DESC, q.phase, q.queue;

-- name: claim_candidates
-- One (queue, priority, phase) range's ready jobs, oldest first, not yet claimed.
-- :horizon_ms > 0: with the jobs of unlimited steps ready within it (a claim ahead of
-- their time, ductline.store.claims).
SELECT id, limit_key, pipeline, step, rate_slot_ms, not_before_ms FROM ductline_jobs
WHERE status = 'pending' AND throttled = 0 AND queue = :queue AND priority = :priority AND phase = :phase
  AND not_before_ms <= ductline_now_ms() + :horizon_ms AND (:horizon_ms = 0 OR limit_key IS NULL)
  AND pipeline IN (SELECT value FROM json_each(:pipelines))
  AND (:definitions IS NULL OR definition IN (SELECT value FROM json_each(:definitions)))
ORDER BY not_before_ms
LIMIT :limit;

-- name: claim_candidates_fifo
-- One queue's oldest ready jobs; the store takes the oldest over all queues (the claim
-- that bounds starvation takes the oldest whatever the priority and phase).
SELECT id, limit_key, pipeline, step, rate_slot_ms, not_before_ms FROM ductline_jobs
WHERE status = 'pending' AND throttled = 0 AND queue = :queue AND priority = :priority AND phase = :phase
  AND not_before_ms <= ductline_now_ms()
  AND pipeline IN (SELECT value FROM json_each(:pipelines))
  AND (:definitions IS NULL OR definition IN (SELECT value FROM json_each(:definitions)))
ORDER BY not_before_ms
LIMIT :limit;

-- name: claim_by_ids
-- :now_ms is the clock the admission read in this transaction, so a rate limit's
-- spacing holds between the recorded attempt starts.
UPDATE ductline_jobs
SET status = 'running', attempts = attempts + 1, lease_token = lower(hex(randomblob(16))),
    lease_expires_ms = :now_ms + :lease_ms, worker_id = :worker_id, rate_slot_ms = NULL
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'pending'
RETURNING id, run_id, pipeline, step, scope, input, attempts, lease_token, timeout_seconds,
          boundary, not_before_ms, limit_key, priority, phase, :now_ms AS claimed_ms;

-- name: lock_limit_keys
-- The write transaction already excludes every other writer.
SELECT 1 AS locked;

-- name: running_with_keys
-- Slots held per key: running attempts, and attempts of a cancelled or expired run
-- whose worker has not yet killed them (their lease expiry is kept until it has).
-- Read after the keys were locked (a statement of its own: it must see what committed
-- while this transaction waited for the locks).
SELECT limit_key, count(*) AS n FROM ductline_jobs
WHERE limit_key IS NOT NULL AND lease_expires_ms IS NOT NULL AND limit_key IN (SELECT value FROM json_each(:keys))
  AND (status = 'running' OR lease_expires_ms > ductline_now_ms())
GROUP BY limit_key;

-- name: rate_last_starts
SELECT limit_key, last_start_ms FROM ductline_rate_slots WHERE limit_key IN (SELECT value FROM json_each(:keys));

-- name: rate_reserved_slots
-- The last start slot held by a waiting job of each key: the next free slot follows it.
SELECT limit_key, max(rate_slot_ms) AS reserved_ms FROM ductline_jobs
WHERE status = 'pending' AND rate_slot_ms IS NOT NULL AND limit_key IN (SELECT value FROM json_each(:keys))
GROUP BY limit_key;

-- name: release_slots
-- The worker killed these attempts after their run was cancelled or expired: their
-- slots are free (nothing is released while a job is still running).
UPDATE ductline_jobs SET lease_expires_ms = NULL
WHERE id IN (SELECT value FROM json_each(:ids)) AND status <> 'running' AND lease_expires_ms IS NOT NULL;

-- name: throttle_jobs
-- Jobs whose key is at capacity leave the ready index until a slot frees.
UPDATE ductline_jobs SET throttled = 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'pending';

-- name: unthrottle_idle_keys
-- Safety net run by maintenance: throttled jobs of a key holding no slot (freed by a
-- path that does not hand it on, e.g. a rescue or a lease run out) become ready again.
UPDATE ductline_jobs SET throttled = 0
WHERE throttled = 1 AND status = 'pending'
  AND NOT EXISTS (SELECT 1 FROM ductline_jobs r
                  WHERE r.limit_key = ductline_jobs.limit_key AND r.limit_key IS NOT NULL
                    AND r.lease_expires_ms IS NOT NULL
                    AND (r.status = 'running' OR r.lease_expires_ms > ductline_now_ms()));
