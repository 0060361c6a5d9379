"""An HTTP service that starts a ductline run per request and answers with its result.

    pip install fastapi uvicorn 'ductline[postgres]'
    export DUCTLINE_DATABASE_URL=postgresql://user@host/db   # or leave the SQLite default
    ductline worker --app examples/fastapi_service.py &
    uvicorn --app-dir examples fastapi_service:app

    curl -X POST localhost:8000/stats -H 'content-type: application/json' -d '{"text": "to be or not"}'

The request handler never blocks the event loop: `trigger_async` and `result_async`
wait in worker threads (on PostgreSQL, woken by a notification when the run ends).
"""

from __future__ import annotations

import os

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

from ductline import Pipeline, RunFailed


def split_words(text: str) -> list[str]:
    return text.split()


def measure(word: str) -> int:
    return len(word)


def summarize(lengths: list[int]) -> dict[str, int]:
    return {"words": len(lengths), "letters": sum(lengths), "longest": max(lengths, default=0)}


# How long a request waits for its run before answering 504 (seconds).
RESULT_WAIT = float(os.environ.get("WORD_STATS_WAIT", "30"))

word_stats = (Pipeline("word_stats", timeout=60)
              .start(split_words, timeout=10)
              .expand(to=measure, timeout=5, max_retry=2)
              .collapse(into=summarize))


class Text(BaseModel):
    text: str


app = FastAPI(title="word stats")


@app.post("/stats")
async def stats(body: Text) -> dict[str, object]:
    handle = await word_stats.trigger_async(body.text)
    try:
        result = await handle.result_async(timeout=RESULT_WAIT)
    except RunFailed as exc:
        raise HTTPException(502, f"run {exc.run_id} {exc.status}: {exc.error}") from exc
    except TimeoutError:
        raise HTTPException(504, f"run {handle.id} has not finished; GET it later") from None
    return {"run_id": handle.id, **result}
