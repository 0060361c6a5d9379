"""An HTTP service that starts a ductline run per request and answers with its result.

    pip install fastapi uvicorn -e ".[postgres]"              # from the checkout's root
    export DUCTLINE_DATABASE_URL=postgresql://user@host/db   # or leave the SQLite default
    ductline worker --app examples/fastapi_service.py &
    uvicorn --app-dir examples fastapi_service:app

    curl -X POST localhost:8000/stats -H 'content-type: application/json' -d '{"text": "to be or not"}'
    curl localhost:8000/stats/RUN_ID

The lifespan opens the database before the first request, so a wrong URL or a
PostgreSQL that was not migrated stops the service at startup instead of failing its
requests, and closes it at shutdown. The handlers never block the event loop:
`trigger_async` and `result_async` wait in worker threads (on PostgreSQL, woken by a
notification when the run ends), and so do the other calls that read the database.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import asynccontextmanager
from typing import AsyncIterator

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from ductline import Pipeline, RunFailed, RunHandle, RunNotFound
from ductline.stores import close_all, store_for


def split_words(text: str) -> list[str]:
    return text.split()


def measure(word: str) -> int:
    return len(word)


def summarize(lengths: list[int]) -> dict[str, int]:
    return {"words": len(lengths), "letters": sum(lengths), "longest": max(lengths, default=0)}


# How long a request waits for its run before answering 202 with the run's id (seconds).
RESULT_WAIT = float(os.environ.get("WORD_STATS_WAIT", "30"))
UNSUCCESSFUL = {"halted", "failed", "cancelled"}

word_stats = (Pipeline("word_stats", timeout=60)
              .start(split_words, timeout=10)
              .expand(to=measure, timeout=5, max_retry=2)
              .collapse(into=summarize))


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # The configured database (DUCTLINE_DATABASE_URL), opened once for the process:
    # triggers and handles share its connection pool. Raises StoreUnavailable or
    # SchemaError here, at startup, when it cannot serve.
    await asyncio.to_thread(store_for)
    try:
        yield
    finally:
        await asyncio.to_thread(close_all)


class Text(BaseModel):
    text: str


app = FastAPI(title="word stats", lifespan=lifespan)


@app.post("/stats", response_model=None)
async def stats(body: Text) -> dict[str, object] | JSONResponse:
    handle = await word_stats.trigger_async(body.text)
    try:
        result = await handle.result_async(timeout=RESULT_WAIT)
    except RunFailed as exc:
        raise HTTPException(502, f"run {exc.run_id} {exc.status}: {exc.error}") from exc
    except TimeoutError:  # still running: 202 with where to ask later
        return JSONResponse({"run_id": handle.id, "status": "running", "location": f"/stats/{handle.id}"},
                            status_code=202)
    return {"run_id": handle.id, "status": "completed", **result}


@app.get("/stats/{run_id}")
async def stats_of(run_id: str) -> dict[str, object]:
    try:
        handle = await asyncio.to_thread(RunHandle.attach, run_id)
    except RunNotFound:
        raise HTTPException(404, f"no run {run_id}") from None
    status = await asyncio.to_thread(handle.status)
    if status in UNSUCCESSFUL:
        raise HTTPException(502, f"run {run_id} {status}: {await asyncio.to_thread(lambda: handle.error)}")
    if status != "completed":
        return {"run_id": run_id, "status": status}
    return {"run_id": run_id, "status": status, **await asyncio.to_thread(handle.output)}
