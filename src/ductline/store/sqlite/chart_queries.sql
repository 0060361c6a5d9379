-- Read-only statements of the dashboard's charts (ductline.web.charts). Nothing here writes.
-- Their cost follows what happened since :since, never the history: runs are found by
-- status (active runs, whatever their age, through ductline_runs_status; runs that ended
-- since :since through ductline_runs_ended), their jobs and attempts by run and by job.
-- The active runs are read by the (status, created_ms) index by name: with few of them
-- among many finished runs, the planner's statistics (a fifth of the runs per status)
-- made it walk a whole index. CROSS JOIN keeps the join order as written: runs, then
-- jobs, then attempts.

-- name: chart_runs_finished
-- Runs that ended in [since, until), counted per pipeline, status and bucket.
SELECT pipeline, status, (finished_ms - :since) / :bucket_ms AS bucket, count(*) AS n
FROM ductline_runs
WHERE status IN ({SETTLED_RUN})
  AND coalesce(finished_ms, created_ms) >= :since AND coalesce(finished_ms, created_ms) < :until
  AND finished_ms IS NOT NULL
GROUP BY pipeline, status, bucket;

-- name: chart_activity
-- Every job, with each of its attempts (or once, without), of the runs active now or ended
-- since :since: what waited, started, ran and failed in the window. (Jobs of those runs
-- that ended before :since come too, and are ignored by the reader: filtering them here
-- made SQLite scan every job to build a Bloom filter.)
WITH touched AS MATERIALIZED (
    SELECT id, pipeline FROM ductline_runs INDEXED BY ductline_runs_status WHERE status IN ({ACTIVE_RUN})
    UNION ALL
    SELECT id, pipeline FROM ductline_runs
    WHERE status IN ({SETTLED_RUN}) AND coalesce(finished_ms, created_ms) >= :since
)
SELECT t.pipeline AS pipeline, j.id AS job_id, j.status AS job_status, j.created_ms AS created_ms,
       j.not_before_ms AS not_before_ms, j.finished_ms AS job_finished_ms, j.attempts AS job_attempts,
       CASE WHEN j.boundary IS NULL THEN 0 ELSE 1 END AS crossed,
       a.attempt AS attempt, a.result AS result, a.started_ms AS started_ms, a.finished_ms AS finished_ms,
       -- what tells an attempt the run's deadline stopped (ductline.model.stops.stopped_by_deadline):
       -- the start of its error is enough, never the whole text
       CASE WHEN a.result = 'timed_out' THEN a.error_type END AS error_type,
       CASE WHEN a.result = 'timed_out' THEN substr(a.error, 1, 64) END AS error_head
FROM touched AS t
CROSS JOIN ductline_jobs AS j
LEFT JOIN ductline_attempts AS a ON a.job_id = j.id
WHERE j.run_id = t.id;
