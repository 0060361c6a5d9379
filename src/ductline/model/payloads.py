"""Out-of-line payloads: the rules, pure (no I/O). The store keeps the bytes
(`ductline.store.payloads`); a child resolves its input's references through its
parent (`resolve` with a fetch function), and nothing here imports the store.

A JSON text -- a step's output, a job's input, a run's trigger arguments -- whose
UTF-8 size is above the inline limit (``payload_inline_bytes``, default 1 MiB) is
stored once in ``ductline_payloads`` with its bytes in ``ductline_payload_chunks``
(`CHUNK_BYTES` = 256 KiB each, numbered from 0), in the transaction that records
it, and the column holds a *reference* instead, written exactly so (compact, keys
in this order)::

    {"__ductline__":"payload","id":"<32 hex digits>","size":<bytes>}

A reference cannot collide with user data: the codec refuses user dicts that use
the key ``"__ductline__"``, and a quote inside a JSON string is always escaped, so
this text occurs in stored JSON only where ductline put a reference. A reference
stands for the JSON text it names: JSON that contains references (a chain's input
``[<ref>]``, a fan-in's input gathering several outputs) is resolved by replacing
each one with its payload's text -- recursively, since a large fan-in input is
itself stored out of line and may contain references.

Limits (bytes of UTF-8 JSON text): a value of exactly ``payload_inline_bytes`` stays
inline, one byte more goes out of line. Above ``payload_max_bytes`` (default 64 MiB)
a step's output fails its attempt with `ductline.PayloadTooLarge` (not retried) and
trigger arguments are refused before anything is written.

Readers never need a whole run's payloads at once: a worker parent serves a
child's input one chunk per request, and downloads stream one chunk at a time
(`ductline.store.payloads`). Payloads live as long as their run's rows.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from ductline.errors import PayloadTooLarge, StoreError

KIB = 1024
MIB = 1024 * KIB
DEFAULT_INLINE_BYTES = 1 * MIB
DEFAULT_MAX_BYTES = 64 * MIB
CHUNK_BYTES = 256 * KIB
# A worker parent reads at most max_bytes plus this from a child in one message.
MESSAGE_SLACK_BYTES = 1 * MIB

_MARK = '{"__ductline__":"payload","id":"'
_REF = re.compile(r'\{"__ductline__":"payload","id":"([0-9a-f]{32})","size":(\d+)\}')

# ``(payload_id, seq) -> chunk bytes``, or ``None`` when there is no such chunk.
Fetch = Callable[[str, int], "bytes | None"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Payload limits of a worker (or a triggering process), in bytes.

    Attributes:
        inline_bytes: the largest JSON text kept inline in its row (default 1 MiB).
        max_bytes: the largest step output or trigger argument list (default 64 MiB).
        chunk_bytes: the size of a stored chunk (256 KiB; the last may be shorter).
    """

    inline_bytes: int = DEFAULT_INLINE_BYTES
    max_bytes: int = DEFAULT_MAX_BYTES
    chunk_bytes: int = CHUNK_BYTES

    @classmethod
    def from_settings(cls, settings: Any) -> "Limits":
        return cls(int(settings.payload_inline_bytes), int(settings.payload_max_bytes))

    @property
    def message_cap(self) -> int:
        """The largest message a worker parent reads from a child; a child that sends
        more is killed and its attempt fails with `PayloadTooLarge`."""
        return self.max_bytes + MESSAGE_SLACK_BYTES


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class Ref:
    """A parsed reference: the payload's id and its size in bytes."""

    id: str
    size: int


@dataclass(frozen=True, slots=True)
class Pending:
    """A value to store out of line once the row that references it is kept."""

    ref: Ref
    text: str

    @property
    def reference(self) -> str:
        return reference(self.ref.id, self.ref.size)


# -- the format ------------------------------------------------------------------------
def size_of(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (JSON from the codec is ASCII: its length)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def reference(payload_id: str, size: int) -> str:
    """The reference text of a payload (see the module docstring)."""
    return f'{_MARK}{payload_id}","size":{int(size)}}}'


def parse_reference(text: str | None) -> Ref | None:
    """The payload ``text`` refers to if it is exactly one reference, else ``None``."""
    if text is None or not text.startswith(_MARK):
        return None
    match = _REF.fullmatch(text)
    return None if match is None else Ref(match.group(1), int(match.group(2)))


def contains_references(text: str | None) -> bool:
    return text is not None and _MARK in text


def check_size(text: str, what: str, limit: int) -> int:
    """The size of ``text`` in bytes.

    Raises:
        PayloadTooLarge: above ``limit`` bytes; the message names ``what``, the size
            and the limit.
    """
    size = size_of(text)
    if size > limit:
        raise PayloadTooLarge(what, size, limit)
    return size


def human_size(size: int) -> str:
    """``3.2 MiB``, ``640.0 KiB``, ``12 B``."""
    if size >= MIB:
        return f"{size / MIB:.1f} MiB"
    if size >= KIB:
        return f"{size / KIB:.1f} KiB"
    return f"{size} B"


def describe(text: str | None) -> str | None:
    """``<payload 3.2 MiB>`` when ``text`` is a reference, else ``None``."""
    ref = parse_reference(text)
    return None if ref is None else f"<payload {human_size(ref.size)}>"


# -- the inline limit ------------------------------------------------------------------
def prepare(text: str, limits: Limits = DEFAULT_LIMITS) -> tuple[str, Pending | None]:
    """``(text_to_store, pending)``: ``text`` itself when it fits inline (pending is
    ``None``), else a new reference and the `Pending` payload to store
    (`ductline.store.payloads.write`) -- after the fenced write that keeps the
    referencing row, so a lost lease leaves no payload."""
    size = size_of(text)
    if size <= limits.inline_bytes:
        return text, None
    pending = Pending(Ref(uuid.uuid4().hex, size), text)
    return pending.reference, pending


# -- reading ---------------------------------------------------------------------------
def resolve(text: str, fetch: Fetch) -> str:
    """``text`` with every reference replaced by its payload's JSON text, recursively.

    Raises:
        StoreError: a payload is missing or incomplete.
    """
    if _MARK not in text:
        return text
    parts: list[str] = []
    pos = 0
    for match in _REF.finditer(text):
        parts.append(text[pos:match.start()])
        parts.append(resolve(read(Ref(match.group(1), int(match.group(2))), fetch), fetch))
        pos = match.end()
    parts.append(text[pos:])
    return "".join(parts)


def read(ref: Ref, fetch: Fetch) -> str:
    """A payload's text, read chunk by chunk until its size is reached."""
    pieces: list[bytes] = []
    got = seq = 0
    while got < ref.size:
        chunk = fetch(ref.id, seq)
        if not chunk:
            raise StoreError(f"payload {ref.id} ({ref.size} bytes) has no chunk {seq}")
        pieces.append(chunk)
        got += len(chunk)
        seq += 1
    if got != ref.size:
        raise StoreError(f"payload {ref.id} has {got} bytes, its reference says {ref.size}")
    return b"".join(pieces).decode("utf-8")
