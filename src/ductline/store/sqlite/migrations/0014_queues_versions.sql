-- 0014: queues and definition versions.
-- Queues: a job waits in its step's queue (`queue=`, default 'default'); a worker
-- claims only the queues it serves (`ductline worker --queue`). The ready index leads
-- with the queue, so a claim reads only the queues it serves, one index range each.
-- Versions: a run records the fingerprint of the definition it started with
-- (ductline.dsl.fingerprint), its jobs carry it, and a worker claims only jobs of the
-- definitions it loaded ('' for runs started before versions: any worker of the
-- pipeline serves those). Workers record the queues and definitions they serve, and
-- the steps of each definition they loaded are kept in ductline_definitions (what
-- `ductline runs move` checks a move against): steps is a JSON object of each step's
-- queue by step name.
ALTER TABLE ductline_runs ADD COLUMN definition TEXT NOT NULL DEFAULT '';
ALTER TABLE ductline_jobs ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
ALTER TABLE ductline_jobs ADD COLUMN definition TEXT NOT NULL DEFAULT '';
ALTER TABLE ductline_workers ADD COLUMN queues TEXT NOT NULL DEFAULT '["default"]';
ALTER TABLE ductline_workers ADD COLUMN definitions TEXT NOT NULL DEFAULT '[]';
CREATE TABLE ductline_definitions (
    fingerprint TEXT PRIMARY KEY,
    pipeline TEXT NOT NULL,
    steps TEXT NOT NULL,
    queues TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
DROP VIEW ductline_ready_queues;
DROP VIEW ductline_ready_levels;
DROP INDEX ductline_jobs_ready;
-- The ready index: claims (per queue: highest priority first, then phase, then oldest)
-- and the wake-up timer read only this, one (queue, priority, phase) range at a time.
CREATE INDEX ductline_jobs_ready ON ductline_jobs (queue, priority, phase, not_before_ms)
    WHERE status = 'pending' AND throttled = 0;
-- Runs by definition: `ductline runs --version` and `ductline runs move`.
CREATE INDEX ductline_runs_definition ON ductline_runs (definition, created_ms);
-- The queues of claimable jobs, as (queue, priority, phase) in no particular order:
-- a recursive walk down the ready index, first over its distinct queue names, then
-- over each queue's priority levels -- one index lookup per name and per level,
-- however many jobs wait -- with each phase. Each of them is read in not-before
-- order from the ready index, so delayed jobs are never scanned and the jobs of a
-- queue a worker does not serve are never read.
CREATE VIEW ductline_ready_queues AS
WITH RECURSIVE names(queue) AS (
    SELECT (SELECT queue FROM ductline_jobs WHERE status = 'pending' AND throttled = 0
            ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM ductline_jobs j
            WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue > names.queue
            ORDER BY j.queue LIMIT 1)
    FROM names WHERE names.queue IS NOT NULL
), levels(queue, priority) AS (
    SELECT names.queue, (SELECT j.priority FROM ductline_jobs j
                         WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = names.queue
                         ORDER BY j.priority DESC LIMIT 1)
    FROM names WHERE names.queue IS NOT NULL
    UNION ALL
    SELECT levels.queue, (SELECT j.priority FROM ductline_jobs j
                          WHERE j.status = 'pending' AND j.throttled = 0 AND j.queue = levels.queue
                            AND j.priority < levels.priority
                          ORDER BY j.priority DESC LIMIT 1)
    FROM levels WHERE levels.priority IS NOT NULL
)
SELECT levels.queue, levels.priority, phases.phase
FROM levels CROSS JOIN (SELECT 0 AS phase UNION ALL SELECT 1) AS phases
WHERE levels.priority IS NOT NULL;
