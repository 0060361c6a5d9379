-- Retention's statements both dialects write alike (the rest are in each dialect's
-- prune_queries.sql).

-- name: prune_workers
-- Rows of workers gone long ago, oldest heartbeat first, a bounded batch at a time:
-- a stopped worker's once its last heartbeat is at or before :stopped_before, any
-- other (a lost worker, which never said it stopped) at or before :lost_before
-- (ductline.model.workers.prune_cutoffs).
DELETE FROM ductline_workers WHERE id IN (
    SELECT id FROM ductline_workers
    WHERE (status NOT IN ({LIVE_WORKER}) AND heartbeat_ms <= :stopped_before)
       OR (status IN ({LIVE_WORKER}) AND heartbeat_ms <= :lost_before)
    ORDER BY heartbeat_ms, id
    LIMIT :limit);

-- name: prunable_workers
-- How many rows prune_workers would delete in all (a dry run).
SELECT count(*) AS n FROM ductline_workers
WHERE (status NOT IN ({LIVE_WORKER}) AND heartbeat_ms <= :stopped_before)
   OR (status IN ({LIVE_WORKER}) AND heartbeat_ms <= :lost_before);
