-- 0003: operating features.
-- Idempotency: trigger(..., key=...) stores the key on the run. At most one *active*
-- run (pending, running, paused or halted: a halted run may still be retried) holds
-- a key per pipeline; a completed, failed or cancelled run releases it, so the same
-- key can start a new run later. The unique partial index is the arbiter between
-- racing triggers (INSERT ... ON CONFLICT DO NOTHING), not a read-then-write.
ALTER TABLE ductline_runs ADD COLUMN idempotency_key TEXT;
CREATE UNIQUE INDEX ductline_runs_idempotency ON ductline_runs (pipeline, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND status IN ('pending', 'running', 'paused', 'halted');
