-- 0016: child runs. A step that returns ductline.children([...]) starts runs of other
-- pipelines; each child run names its parent run, the parent's job (the step run that
-- awaits it) and its index among that job's children. A child run's id is derived
-- from (parent job, index) (ductline.model.children.child_run_id), so it is inserted
-- once however often the parent's step returns its children.
ALTER TABLE ductline_runs ADD COLUMN parent_run_id TEXT;
ALTER TABLE ductline_runs ADD COLUMN parent_job_id TEXT;
ALTER TABLE ductline_runs ADD COLUMN child_index INTEGER;
-- A parent's children, newest first (ductline runs --parent, the run page's tree, a
-- stop of the parent that cancels them).
CREATE INDEX ductline_runs_parent ON ductline_runs (parent_run_id, created_ms, id) WHERE parent_run_id IS NOT NULL;
-- Unfinished children (a stop of their parent reaches them: orphaned_children).
CREATE INDEX ductline_runs_children_open ON ductline_runs (parent_run_id)
    WHERE parent_run_id IS NOT NULL AND status IN ('pending', 'running', 'paused', 'halted');
-- An awaiting job's children in order (its wake-up reads them).
CREATE INDEX ductline_runs_parent_job ON ductline_runs (parent_job_id, child_index) WHERE parent_job_id IS NOT NULL;
-- Awaiting jobs (the sweep that wakes those whose children ended while no process
-- that knows the parent's pipeline recorded their end).
CREATE INDEX ductline_jobs_awaiting_children ON ductline_jobs (created_ms) WHERE status = 'awaiting';
