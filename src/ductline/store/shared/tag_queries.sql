-- Run tags (ductline.model.tags), both dialects.

-- name: run_tags
SELECT key, value FROM ductline_run_tags WHERE run_id = :run_id ORDER BY key;
