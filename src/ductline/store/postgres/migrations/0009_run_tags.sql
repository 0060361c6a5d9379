-- 0009: run tags (ductline.model.tags): labels a run carries, written with the run,
-- deleted with it (prune_tags). Runs are found by tag through the (key, value) index;
-- the run id in it answers the lookup from the index alone.
CREATE TABLE ductline_run_tags (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE INDEX ductline_run_tags_lookup ON ductline_run_tags (key, value, run_id);
