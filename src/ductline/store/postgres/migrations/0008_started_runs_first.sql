-- 0008: started runs first. At equal priority a claim takes the jobs of runs already
-- under way before the first step of a run (ductline.model.claim_order), so a burst
-- of new runs does not stretch the hops of the runs in flight. A job's phase is fixed
-- when it is created: 0 for a job of a run under way (any step but the first), 1 for
-- a run's first step.
ALTER TABLE ductline_jobs ADD COLUMN phase BIGINT NOT NULL DEFAULT 0;
-- Jobs waiting when this runs: those of runs not yet started are their first steps.
UPDATE ductline_jobs SET phase = 1
WHERE status IN ('pending', 'held', 'paused')
  AND run_id IN (SELECT id FROM ductline_runs WHERE status = 'pending');
DROP INDEX ductline_jobs_ready;
-- The ready index: claims (highest priority first, then phase, then oldest) and the
-- wake-up timer read only this, one (priority, phase) queue at a time
-- (ductline_ready_queues).
CREATE INDEX ductline_jobs_ready ON ductline_jobs (priority, phase, not_before_ms) WHERE status = 'pending' AND throttled = 0;
-- The queues of claimable jobs: every priority level (ductline_ready_levels, one index
-- lookup per level) with each phase. Each queue is read in not-before order from the
-- ready index, so delayed jobs are never scanned.
CREATE VIEW ductline_ready_queues AS
SELECT levels.priority, phases.phase
FROM ductline_ready_levels levels CROSS JOIN (VALUES (0::bigint), (1::bigint)) AS phases(phase);
