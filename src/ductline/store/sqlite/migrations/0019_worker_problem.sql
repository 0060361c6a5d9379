-- 0019: why a live worker is unhealthy, in its own words (e.g. its step children fail
-- to start: which app, and the error), written with its heartbeat; NULL when it is not.
ALTER TABLE ductline_workers ADD COLUMN problem TEXT;
