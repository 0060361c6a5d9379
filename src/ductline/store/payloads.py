"""Out-of-line payloads in the database: writing a payload's chunks in the
transaction that keeps the row referring to it, and reading them back. The rules
(the inline limit, the reference format, resolving references) are pure and live
in `ductline.model.payloads`; they are named here too, so the store's callers
read one module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from ductline.errors import StoreError
from ductline.model.payloads import (CHUNK_BYTES, DEFAULT_INLINE_BYTES, DEFAULT_LIMITS, DEFAULT_MAX_BYTES, KIB,
                                     MESSAGE_SLACK_BYTES, MIB, Fetch, Limits, Pending, Ref, check_size,
                                     contains_references, describe, human_size, parse_reference, prepare, read,
                                     reference, resolve, size_of)

if TYPE_CHECKING:
    from ductline.store.store import Store
    from ductline.store.tx import Tx

__all__ = ["CHUNK_BYTES", "DEFAULT_INLINE_BYTES", "DEFAULT_LIMITS", "DEFAULT_MAX_BYTES", "KIB", "MESSAGE_SLACK_BYTES",
           "MIB", "Fetch", "Limits", "Pending", "Ref", "check_size", "contains_references", "describe", "human_size",
           "parse_reference", "prepare", "read", "reference", "resolve", "size_of", "write", "spill", "read_chunk",
           "load", "load_in", "info", "chunk_count", "run_payloads", "stream"]


# -- writing ---------------------------------------------------------------------------
def write(tx: "Tx", run_id: str, pending: Pending, limits: Limits = DEFAULT_LIMITS) -> int:
    """Store a payload in the current transaction, one chunk per statement (only
    one chunk is copied at a time). Returns the number of chunks."""
    data = pending.text.encode("utf-8")
    step = limits.chunk_bytes
    count = max(1, -(-len(data) // step))
    tx.s.execute("insert_payload", {"id": pending.ref.id, "run_id": run_id, "size": len(data), "chunks": count})
    view = memoryview(data)
    for seq in range(count):
        tx.s.execute("insert_payload_chunk", {"payload_id": pending.ref.id, "seq": seq,
                                              "data": bytes(view[seq * step:(seq + 1) * step])})
    return count


def spill(tx: "Tx", run_id: str, text: str, limits: Limits = DEFAULT_LIMITS) -> str:
    """Store ``text`` out of line now if it is above the inline limit; returns what
    the row should hold (``text`` or its reference)."""
    stored, pending = prepare(text, limits)
    if pending is not None:
        write(tx, run_id, pending, limits)
    return stored



# -- reading ---------------------------------------------------------------------------
def read_chunk(store: "Store", run_id: str, payload_id: str, seq: int) -> bytes | None:
    """Chunk ``seq`` of a payload of run ``run_id`` (``None`` if there is none)."""
    with store.dialect.reader() as s:
        rows = s.fetch("payload_chunk", {"id": payload_id, "seq": int(seq), "run_id": run_id})
    return bytes(rows[0]["data"]) if rows else None


def load(store: "Store", run_id: str, text: str | None) -> str | None:
    """Stored JSON text with its references resolved (``None`` stays ``None``)."""
    if text is None or not contains_references(text):
        return text
    return resolve(text, lambda pid, seq: read_chunk(store, run_id, pid, seq))


def load_in(tx: "Tx", run_id: str, text: str) -> str:
    """`load`, inside a write transaction."""
    if not contains_references(text):
        return text

    def fetch(pid: str, seq: int) -> bytes | None:
        rows = tx.s.fetch("payload_chunk", {"id": pid, "seq": seq, "run_id": run_id})
        return bytes(rows[0]["data"]) if rows else None

    return resolve(text, fetch)


def info(store: "Store", payload_id: str) -> dict[str, Any] | None:
    """``{id, run_id, size, chunks, created_ms}`` of a payload, or ``None``."""
    with store.dialect.reader() as s:
        rows = s.fetch("payload_info", {"id": payload_id})
    return rows[0] if rows else None


def chunk_count(store: "Store", payload_id: str) -> int:
    """Chunk rows stored for a payload."""
    with store.dialect.reader() as s:
        return int(s.fetch("payload_chunk_count", {"id": payload_id})[0]["n"])


def run_payloads(store: "Store", run_id: str) -> list[dict[str, Any]]:
    """The payloads of a run: ``{id, size, chunks, created_ms}``, oldest first."""
    with store.dialect.reader() as s:
        return s.fetch("run_payloads", {"run_id": run_id})


def stream(store: "Store", run_id: str, payload_id: str) -> Iterator[bytes]:
    """A payload's stored bytes, one chunk at a time (for downloads).

    Raises:
        StoreError: the run has no such payload, or a chunk is missing.
    """
    row = info(store, payload_id)
    if row is None or row["run_id"] != run_id:
        raise StoreError(f"run {run_id} has no payload {payload_id!r}")
    for seq in range(int(row["chunks"])):
        chunk = read_chunk(store, run_id, payload_id, seq)
        if chunk is None:
            raise StoreError(f"payload {payload_id} has no chunk {seq}")
        yield chunk
