-- Run tags (ductline.model.tags), PostgreSQL.

-- name: insert_run_tags
-- A run's tags, written in the transaction that writes the run: :items is a JSON list
-- of [run_id, key, value].
INSERT INTO ductline_run_tags (run_id, key, value)
SELECT x.item->>0, x.item->>1, x.item->>2
FROM jsonb_array_elements(:items::jsonb) AS x(item);

-- name: tagged_runs_older
-- Runs carrying every tag of :tags (a JSON list of [key, value]), newest first before a
-- cursor (created_ms, id), optionally of one status and one pipeline. The first tag
-- (:key, :value) finds the candidates through the (key, value) index; each of the
-- others is one primary-key probe per candidate.
SELECT r.id, r.pipeline, r.status, r.halt_reason, r.created_ms, r.started_ms, r.finished_ms, r.definition
FROM ductline_run_tags t JOIN ductline_runs r ON r.id = t.run_id
WHERE t.key = :key::text AND t.value = :value::text
  AND (:status::text IS NULL OR r.status = :status::text)
  AND (:pipeline::text IS NULL OR r.pipeline = :pipeline::text)
  AND r.created_ms <= :created_ms AND (r.created_ms < :created_ms OR r.id < :id::text)
  AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(:tags::jsonb) AS q(item)
                  WHERE NOT EXISTS (SELECT 1 FROM ductline_run_tags o
                                    WHERE o.run_id = r.id AND o.key = q.item->>0 AND o.value = q.item->>1))
ORDER BY r.created_ms DESC, r.id DESC
LIMIT :limit;

-- name: tagged_runs_newer
-- tagged_runs_older's page after a cursor (read oldest first; the reader reverses it).
SELECT r.id, r.pipeline, r.status, r.halt_reason, r.created_ms, r.started_ms, r.finished_ms, r.definition
FROM ductline_run_tags t JOIN ductline_runs r ON r.id = t.run_id
WHERE t.key = :key::text AND t.value = :value::text
  AND (:status::text IS NULL OR r.status = :status::text)
  AND (:pipeline::text IS NULL OR r.pipeline = :pipeline::text)
  AND r.created_ms >= :created_ms AND (r.created_ms > :created_ms OR r.id > :id::text)
  AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(:tags::jsonb) AS q(item)
                  WHERE NOT EXISTS (SELECT 1 FROM ductline_run_tags o
                                    WHERE o.run_id = r.id AND o.key = q.item->>0 AND o.value = q.item->>1))
ORDER BY r.created_ms, r.id
LIMIT :limit;
