-- Read-only statements of the dashboard (ductline.web), PostgreSQL. Nothing here writes.
-- Run listings are keyset-paginated newest first by (created_ms, id): a page costs
-- an index range scan of `limit` rows however deep it is, never an OFFSET walk.
-- The first page passes a cursor later than any run (created_ms = 2^62, id = '').
-- One statement per filter combination, so each gets the plan of its own index
-- (psycopg prepares repeated statements; a generic `(:x IS NULL OR col = :x)` plan
-- would pick one index for every combination).

-- name: web_runs_older
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms, definition
FROM ductline_runs
WHERE created_ms <= :created_ms AND (created_ms < :created_ms OR id < :id)
ORDER BY created_ms DESC, id DESC
LIMIT :limit;

-- name: web_runs_older_status
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms, definition
FROM ductline_runs
WHERE status = :status AND created_ms <= :created_ms AND (created_ms < :created_ms OR id < :id)
ORDER BY created_ms DESC, id DESC
LIMIT :limit;

-- name: web_runs_older_pipeline
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms, definition
FROM ductline_runs
WHERE pipeline = :pipeline AND created_ms <= :created_ms AND (created_ms < :created_ms OR id < :id)
ORDER BY created_ms DESC, id DESC
LIMIT :limit;

-- name: web_runs_older_pipeline_status
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms, definition
FROM ductline_runs
WHERE pipeline = :pipeline AND status = :status AND created_ms <= :created_ms AND (created_ms < :created_ms OR id < :id)
ORDER BY created_ms DESC, id DESC
LIMIT :limit;

-- name: web_runs_newer
-- The page before a cursor (read oldest first; the reader reverses it).
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms, definition
FROM ductline_runs
WHERE created_ms >= :created_ms AND (created_ms > :created_ms OR id > :id)
ORDER BY created_ms, id
LIMIT :limit;

-- name: web_runs_newer_status
-- The page before a cursor (read oldest first; the reader reverses it).
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms, definition
FROM ductline_runs
WHERE status = :status AND created_ms >= :created_ms AND (created_ms > :created_ms OR id > :id)
ORDER BY created_ms, id
LIMIT :limit;

-- name: web_runs_newer_pipeline
-- The page before a cursor (read oldest first; the reader reverses it).
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms, definition
FROM ductline_runs
WHERE pipeline = :pipeline AND created_ms >= :created_ms AND (created_ms > :created_ms OR id > :id)
ORDER BY created_ms, id
LIMIT :limit;

-- name: web_runs_newer_pipeline_status
-- The page before a cursor (read oldest first; the reader reverses it).
SELECT id, pipeline, status, halt_reason, created_ms, started_ms, finished_ms, definition
FROM ductline_runs
WHERE pipeline = :pipeline AND status = :status AND created_ms >= :created_ms AND (created_ms > :created_ms OR id > :id)
ORDER BY created_ms, id
LIMIT :limit;

-- name: web_run_counts
-- Runs per status, each counted up to :cap + 1 by the (status, created_ms) index alone:
-- the overview's cost does not grow with history (a million finished runs would
-- otherwise be read on every refresh); more than :cap is shown as such.
SELECT s.status, (SELECT count(*) FROM (SELECT 1 FROM ductline_runs r WHERE r.status = s.status
                                        LIMIT :cap + 1) AS capped) AS n
FROM jsonb_array_elements_text(:statuses::jsonb) AS s(status);

-- name: web_pipeline_names
-- The distinct pipelines of the runs table by skipping through the (pipeline,
-- created_ms, id) index (one probe per pipeline, not one row per run).
WITH RECURSIVE names(pipeline) AS (
    (SELECT pipeline FROM ductline_runs ORDER BY pipeline LIMIT 1)
    UNION ALL
    SELECT (SELECT r.pipeline FROM ductline_runs r WHERE r.pipeline > names.pipeline ORDER BY r.pipeline LIMIT 1)
    FROM names WHERE names.pipeline IS NOT NULL
)
SELECT pipeline FROM names WHERE pipeline IS NOT NULL ORDER BY pipeline;

-- name: web_pipeline_counts
-- One pipeline's runs per status, each counted up to :cap + 1 by the (pipeline, status,
-- created_ms, id) index alone (the reader asks once per pipeline of web_pipeline_names:
-- one statement over every pipeline would be estimated costly enough to be JIT-compiled,
-- a second of compiling on every refresh).
SELECT s.status, (SELECT count(*) FROM (SELECT 1 FROM ductline_runs r WHERE r.pipeline = :pipeline
                                        AND r.status = s.status LIMIT :cap + 1) AS capped) AS n
FROM jsonb_array_elements_text(:statuses::jsonb) AS s(status);

-- name: web_job_counts
-- Each count reads one of the partial indexes on pending and running jobs.
SELECT
    (SELECT count(*) FROM ductline_jobs WHERE status = 'pending' AND throttled = 0 AND not_before_ms <= t.now_ms) AS ready,
    (SELECT count(*) FROM ductline_jobs WHERE status = 'pending' AND throttled = 0 AND not_before_ms > t.now_ms) AS delayed,
    (SELECT count(*) FROM ductline_jobs WHERE status = 'running') AS running,
    (SELECT count(*) FROM ductline_jobs WHERE status = 'pending' AND throttled = 1) AS throttled,
    t.now_ms AS now_ms
FROM (SELECT ductline_now_ms() AS now_ms) AS t;

-- name: web_run_events
-- Every attempt of a run with its step, oldest first: the source of the event stream.
SELECT a.job_id, a.attempt, a.result, a.started_ms, a.finished_ms, a.error_type, a.error,
       j.step, j.scope, j.elem_index
FROM ductline_attempts a JOIN ductline_jobs j ON j.id = a.job_id
WHERE a.run_id = :run_id
ORDER BY a.started_ms, a.job_id, a.attempt;
