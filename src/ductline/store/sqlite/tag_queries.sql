-- Run tags (ductline.model.tags), SQLite.

-- name: insert_run_tags
-- A run's tags, written in the transaction that writes the run: :items is a JSON list
-- of [run_id, key, value].
INSERT INTO ductline_run_tags (run_id, key, value)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]')
FROM json_each(:items);

-- name: tagged_runs_older
-- Runs carrying every tag of :tags (a JSON list of [key, value]), newest first before a
-- cursor (created_ms, id), optionally of one status and one pipeline. The first tag
-- (:key, :value) finds the candidates through the (key, value) index; each of the
-- others is one primary-key probe per candidate.
SELECT r.id, r.pipeline, r.status, r.halt_reason, r.created_ms, r.started_ms, r.finished_ms, r.definition
FROM ductline_run_tags t JOIN ductline_runs r ON r.id = t.run_id
WHERE t.key = :key AND t.value = :value
  AND (:status IS NULL OR r.status = :status) AND (:pipeline IS NULL OR r.pipeline = :pipeline)
  AND r.created_ms <= :created_ms AND (r.created_ms < :created_ms OR r.id < :id)
  AND NOT EXISTS (SELECT 1 FROM json_each(:tags) q
                  WHERE NOT EXISTS (SELECT 1 FROM ductline_run_tags o
                                    WHERE o.run_id = r.id AND o.key = json_extract(q.value, '$[0]')
                                      AND o.value = json_extract(q.value, '$[1]')))
ORDER BY r.created_ms DESC, r.id DESC
LIMIT :limit;

-- name: tagged_runs_newer
-- tagged_runs_older's page after a cursor (read oldest first; the reader reverses it).
SELECT r.id, r.pipeline, r.status, r.halt_reason, r.created_ms, r.started_ms, r.finished_ms, r.definition
FROM ductline_run_tags t JOIN ductline_runs r ON r.id = t.run_id
WHERE t.key = :key AND t.value = :value
  AND (:status IS NULL OR r.status = :status) AND (:pipeline IS NULL OR r.pipeline = :pipeline)
  AND r.created_ms >= :created_ms AND (r.created_ms > :created_ms OR r.id > :id)
  AND NOT EXISTS (SELECT 1 FROM json_each(:tags) q
                  WHERE NOT EXISTS (SELECT 1 FROM ductline_run_tags o
                                    WHERE o.run_id = r.id AND o.key = json_extract(q.value, '$[0]')
                                      AND o.value = json_extract(q.value, '$[1]')))
ORDER BY r.created_ms, r.id
LIMIT :limit;
