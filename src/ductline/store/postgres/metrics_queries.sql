-- Read-only statements of ductline.observability (metrics gauges). Nothing here writes.

-- name: metrics_queue_depths
-- Ready, delayed and throttled jobs per pipeline in one aggregate over the partial index of
-- pending jobs (no rows are loaded). The clock is read once for the statement
-- (ductline_now_ms() is volatile: in the WHERE clause it would be read per row).
WITH clock AS (SELECT ductline_now_ms() AS now_ms)
SELECT j.pipeline AS pipeline,
       count(*) FILTER (WHERE j.throttled = 0 AND j.not_before_ms <= clock.now_ms) AS ready,
       count(*) FILTER (WHERE j.throttled = 0 AND j.not_before_ms > clock.now_ms) AS delayed,
       count(*) FILTER (WHERE j.throttled = 1) AS throttled
FROM ductline_jobs AS j CROSS JOIN clock
WHERE j.status = 'pending'
GROUP BY j.pipeline
ORDER BY j.pipeline;

-- name: metrics_run_counts
-- Runs recorded in the database per pipeline and status (pruned runs are gone from it).
SELECT pipeline, status, count(*) AS n
FROM ductline_runs
GROUP BY pipeline, status
ORDER BY pipeline, status;
