-- 0019: a job's run is no longer checked by a foreign key. Every job is inserted by a
-- statement that names its run (the trigger's own statement inserts both; the others
-- hold the run's lock), and runs are deleted only by `ductline prune` together with
-- their jobs, so the check never refused anything; SQLite declares the key without
-- enforcing it. The check cost every job insert an index lookup and a lock on its run's
-- row, with its WAL record: about a tenth of a trigger's time in the server.
ALTER TABLE ductline_jobs DROP CONSTRAINT ductline_jobs_run_id_fkey;
