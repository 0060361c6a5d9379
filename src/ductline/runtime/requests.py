"""Answering a child's requests (context values, boundary crossings, chunks of
its input's out-of-line values) from the parent, which alone talks to the
database."""

from __future__ import annotations

from typing import Any

from ductline.errors import LeaseLost, StoreError
from ductline.execution import protocol
from ductline.runtime.slots import Runner
from ductline.store import Store, payloads
from ductline.store.records import ClaimedJob


def answer(store: Store, runner: Runner, job: ClaimedJob, kind: str, args: tuple[Any, ...], seq: int) -> None:
    """Answer one request of the attempt of ``job`` on ``runner`` (a REPLY, or a
    REPLY_ERROR the step sees as `ductline.ExecutionError`), numbered ``seq`` as
    the request was."""
    try:
        if kind == "context_get":
            value: Any = store.context_get(job.run_id, args[0])
        elif kind == "context_set":
            value = store.context_set(job.run_id, args[0], args[1], overwrite=bool(args[2]), job_id=job.job_id,
                                      lease_token=job.lease_token)
        elif kind == "boundary":
            value = store.mark_boundary(job.job_id, job.lease_token, args[0])
        elif kind == "payload_chunk":  # the child reads its input's out-of-line values
            value = payloads.read_chunk(store, job.run_id, str(args[0]), int(args[1]))
        else:
            runner.send(protocol.reply_error(f"unknown request {kind!r}", seq))
            return
    except (LeaseLost, TypeError) as exc:  # the step is told (a lost lease, a key no value can have);
        runner.send(protocol.reply_error(str(exc), seq))  # nothing was written
        return
    except StoreError as exc:
        runner.send(protocol.reply_error(f"database unavailable: {exc}", seq))
        return
    runner.send(protocol.reply(value, seq))
