-- Read-only statements of the dashboard's charts (ductline.web.charts). Nothing here writes.
-- Their cost follows what happened since :since, never the history: runs are found by
-- status (active runs, whatever their age; runs that ended since :since) through
-- ductline_runs_ended, their jobs and attempts by run and by job. The status sets are
-- rendered into the statement as literals, so the planner estimates each from the
-- column's statistics: given them as a bound list, it guessed a fifth of all runs per
-- status, hashed whole tables, and compiled the plan (JIT) for a second.

-- name: chart_runs_finished
-- Runs that ended in [since, until), counted per pipeline, status and bucket.
SELECT pipeline, status, (finished_ms - :since::bigint) / :bucket_ms::bigint AS bucket, count(*) AS n
FROM ductline_runs
WHERE status IN ({SETTLED_RUN})
  AND coalesce(finished_ms, created_ms) >= :since::bigint AND coalesce(finished_ms, created_ms) < :until::bigint
  AND finished_ms IS NOT NULL
GROUP BY pipeline, status, bucket;

-- name: chart_activity
-- Every job, with each of its attempts (or once, without), of the runs active now or ended
-- since :since: what waited, started, ran and failed in the window. (Jobs of those runs
-- that ended before :since come too, and are ignored by the reader.)
WITH touched AS (
    SELECT id, pipeline FROM ductline_runs WHERE status IN ({ACTIVE_RUN})
    UNION ALL
    SELECT id, pipeline FROM ductline_runs
    WHERE status IN ({SETTLED_RUN}) AND coalesce(finished_ms, created_ms) >= :since::bigint
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
JOIN ductline_jobs AS j ON j.run_id = t.id
LEFT JOIN ductline_attempts AS a ON a.job_id = j.id;
