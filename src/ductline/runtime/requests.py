"""Answering a child's requests (context values, boundary crossings, chunks of
its input's out-of-line values) from the
parent, which alone talks to the database."""

from __future__ import annotations

import logging
from typing import Any

from ductline.errors import StoreError
from ductline.runtime.slots import Child
from ductline.store import Store, payloads
from ductline.store.records import ClaimedJob

log = logging.getLogger("ductline.worker")


def answer(store: Store, child: Child, job: ClaimedJob, kind: str, args: tuple[Any, ...]) -> None:
    try:
        if kind == "context_get":
            value: Any = store.context_get(job.run_id, args[0])
        elif kind == "context_set":
            value = store.context_set(job.run_id, args[0], args[1], overwrite=bool(args[2]))
        elif kind == "boundary":
            value = store.mark_boundary(job.job_id, job.lease_token, args[0])
        elif kind == "payload_chunk":  # the child reads its input's out-of-line values
            value = payloads.read_chunk(store, job.run_id, str(args[0]), int(args[1]))
        else:
            child.send(("reply_error", f"unknown request {kind!r}"))
            return
    except StoreError as exc:
        child.send(("reply_error", f"database unavailable: {exc}"))
        return
    child.send(("reply", value))
