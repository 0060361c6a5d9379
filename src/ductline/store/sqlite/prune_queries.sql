-- Retention: deleting whole runs with everything that belongs to them, oldest
-- finished first, in transactions of bounded size (ductline.operations.prune).

-- name: prune_candidates
-- Runs of the given statuses that ended (or, not ended, were created) at or before the cutoff,
-- oldest first, after a keyset position (age_ms, id), with the rows each one holds.
SELECT r.id, coalesce(r.finished_ms, r.created_ms) AS age_ms,
       (SELECT count(*) FROM ductline_jobs j WHERE j.run_id = r.id)
     + (SELECT count(*) FROM ductline_attempts a WHERE a.run_id = r.id)
     + (SELECT count(*) FROM ductline_step_logs l WHERE l.run_id = r.id)
     + coalesce((SELECT sum(p.chunks + 1) FROM ductline_payloads p WHERE p.run_id = r.id), 0) AS weight
FROM ductline_runs r
WHERE r.status IN (SELECT value FROM json_each(:statuses)) AND coalesce(r.finished_ms, r.created_ms) <= :cutoff_ms
  AND (coalesce(r.finished_ms, r.created_ms) > :after_ms
       OR (coalesce(r.finished_ms, r.created_ms) = :after_ms AND r.id > :after_id))
ORDER BY coalesce(r.finished_ms, r.created_ms), r.id
LIMIT :limit;

-- name: prune_lock
-- The runs of a batch that are still in a pruned status, locked for the batch (one
-- revived or changed meanwhile is left whole; one another pruner holds is skipped).
SELECT id FROM ductline_runs WHERE id IN (SELECT value FROM json_each(:run_ids)) AND status IN (SELECT value FROM json_each(:statuses))
ORDER BY id;

-- name: prune_busy
-- The runs of a batch that a worker may be running (a claimed job): their rows are
-- left whole, as a live attempt would go on writing for its run (context, payload
-- chunks) after the run was gone. SQLite's writes are serialized: no claim can be
-- half-done while this transaction reads.
SELECT DISTINCT run_id FROM ductline_jobs
WHERE run_id IN (SELECT value FROM json_each(:run_ids)) AND status = 'running';

-- name: prune_chunks
DELETE FROM ductline_payload_chunks WHERE payload_id IN (
    SELECT id FROM ductline_payloads WHERE run_id IN (SELECT value FROM json_each(:run_ids)));

-- name: prune_payloads
DELETE FROM ductline_payloads WHERE run_id IN (SELECT value FROM json_each(:run_ids));

-- name: prune_events
DELETE FROM ductline_events WHERE run_id IN (SELECT value FROM json_each(:run_ids));

-- name: prune_step_logs
DELETE FROM ductline_step_logs WHERE run_id IN (SELECT value FROM json_each(:run_ids));

-- name: prune_attempts
DELETE FROM ductline_attempts WHERE run_id IN (SELECT value FROM json_each(:run_ids));

-- name: prune_context
DELETE FROM ductline_context WHERE run_id IN (SELECT value FROM json_each(:run_ids));

-- name: prune_fanins
DELETE FROM ductline_fanins WHERE run_id IN (SELECT value FROM json_each(:run_ids));

-- name: prune_tags
DELETE FROM ductline_run_tags WHERE run_id IN (SELECT value FROM json_each(:run_ids));

-- name: prune_operator_actions
DELETE FROM ductline_operator_actions WHERE run_id IN (SELECT value FROM json_each(:run_ids));

-- name: prune_jobs
DELETE FROM ductline_jobs WHERE run_id IN (SELECT value FROM json_each(:run_ids));

-- name: prune_runs
DELETE FROM ductline_runs WHERE id IN (SELECT value FROM json_each(:run_ids));

-- name: prune_exclusive
-- SQLite's write transactions are serialized already (BEGIN IMMEDIATE): one pruner
-- at a time holds by construction.
SELECT 1 AS locked;
