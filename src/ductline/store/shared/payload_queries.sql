-- Out-of-line payloads (ductline.store.payloads): a value above the inline limit is
-- one ductline_payloads row plus its bytes in numbered chunks. Payloads are written
-- once and never changed, so chunks can be read one statement at a time. Both
-- dialects run these as written.

-- name: insert_payload
INSERT INTO ductline_payloads (id, run_id, size, chunks, created_ms)
VALUES (:id, :run_id, :size, :chunks, ductline_now_ms());

-- name: insert_payload_chunk
INSERT INTO ductline_payload_chunks (payload_id, seq, data) VALUES (:payload_id, :seq, :data);

-- name: payload_info
SELECT id, run_id, size, chunks, created_ms FROM ductline_payloads WHERE id = :id;

-- name: payload_chunk
-- One chunk of a payload of the given run (a payload is only ever read for its own run).
SELECT c.data AS data FROM ductline_payload_chunks c
JOIN ductline_payloads p ON p.id = c.payload_id
WHERE c.payload_id = :id AND c.seq = :seq AND p.run_id = :run_id;

-- name: payload_chunk_count
SELECT count(*) AS n FROM ductline_payload_chunks WHERE payload_id = :id;

-- name: run_payloads
SELECT id, size, chunks, created_ms FROM ductline_payloads WHERE run_id = :run_id ORDER BY created_ms, id;
