-- Retention: deleting whole runs with everything that belongs to them, oldest
-- finished first, in transactions of bounded size (ductline.operations.prune).

-- name: prune_candidates
-- Runs of the given statuses that ended (or, not ended, were created) at or before the cutoff,
-- oldest first, after a keyset position (age_ms, id), with the rows each one holds.
-- Each status is read in order from its own range of the (status, age, id) index and
-- the few rows merged: one scan over several statuses would read and sort every old
-- run (a second per page with a million of them).
SELECT c.id, c.age_ms,
       (SELECT count(*) FROM ductline_jobs j WHERE j.run_id = c.id)
     + (SELECT count(*) FROM ductline_attempts a WHERE a.run_id = c.id)
     + (SELECT count(*) FROM ductline_step_logs l WHERE l.run_id = c.id)
     + coalesce((SELECT sum(p.chunks + 1) FROM ductline_payloads p WHERE p.run_id = c.id), 0) AS weight
FROM (
    SELECT per.id, per.age_ms
    FROM jsonb_array_elements_text(:statuses::jsonb) AS s(status) CROSS JOIN LATERAL (
        SELECT r.id, coalesce(r.finished_ms, r.created_ms) AS age_ms
        FROM ductline_runs r
        WHERE r.status = s.status AND coalesce(r.finished_ms, r.created_ms) <= :cutoff_ms
          AND (coalesce(r.finished_ms, r.created_ms), r.id) > (:after_ms::bigint, :after_id::text)
        ORDER BY coalesce(r.finished_ms, r.created_ms), r.id
        LIMIT :limit
    ) AS per
    ORDER BY per.age_ms, per.id
    LIMIT :limit
) AS c
ORDER BY c.age_ms, c.id;

-- name: prune_lock
-- The runs of a batch that are still in a pruned status, locked for the batch (one
-- revived or changed meanwhile is left whole; one another pruner holds is skipped).
SELECT id FROM ductline_runs WHERE id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb)) AND status IN (SELECT jsonb_array_elements_text(:statuses::jsonb))
ORDER BY id FOR UPDATE SKIP LOCKED;

-- name: prune_busy
-- The runs of a batch (already locked by prune_lock) that a worker may be running:
-- one with a claimed job, or with a job another transaction holds (a claim not yet
-- committed). Their rows are left whole: a live attempt would go on writing for its
-- run (context, payload chunks) after the run was gone. The jobs are locked with
-- SKIP LOCKED, never waited for: a completion holds its job and then waits for the
-- run's key lock (the job insert's foreign key), which this prune holds.
WITH locked AS (
    SELECT run_id, status FROM ductline_jobs
    WHERE run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb))
    FOR UPDATE SKIP LOCKED
), every AS (
    SELECT run_id, count(*) AS n FROM ductline_jobs
    WHERE run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb)) GROUP BY run_id
), taken AS (
    SELECT run_id, count(*) AS n, count(*) FILTER (WHERE status = 'running') AS running
    FROM locked GROUP BY run_id
)
SELECT e.run_id FROM every e LEFT JOIN taken t ON t.run_id = e.run_id
WHERE t.n IS NULL OR t.n < e.n OR t.running > 0;

-- name: prune_chunks
DELETE FROM ductline_payload_chunks WHERE payload_id IN (
    SELECT id FROM ductline_payloads WHERE run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb)));

-- name: prune_payloads
DELETE FROM ductline_payloads WHERE run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb));

-- name: prune_events
DELETE FROM ductline_events WHERE run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb));

-- name: prune_step_logs
DELETE FROM ductline_step_logs WHERE run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb));

-- name: prune_attempts
DELETE FROM ductline_attempts WHERE run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb));

-- name: prune_context
DELETE FROM ductline_context WHERE run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb));

-- name: prune_fanins
DELETE FROM ductline_fanins WHERE run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb));

-- name: prune_tags
DELETE FROM ductline_run_tags WHERE run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb));

-- name: prune_operator_actions
DELETE FROM ductline_operator_actions WHERE run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb));

-- name: prune_jobs
DELETE FROM ductline_jobs WHERE run_id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb));

-- name: prune_runs
DELETE FROM ductline_runs WHERE id IN (SELECT jsonb_array_elements_text(:run_ids::jsonb));

-- name: prune_exclusive
-- The retention maintainer's turn: one worker of the fleet prunes at a time. A
-- transaction-scoped lock (released at commit, so it is safe behind a transaction
-- pooler); a worker that does not get it leaves the batch to the one that has it.
SELECT pg_try_advisory_xact_lock(4242002) AS locked;
