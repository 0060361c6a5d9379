"""A run's events as server-sent events: oldest first, ``workflow_end`` last, then closed."""

from __future__ import annotations

import html
import json
import re
import threading

import rt_app
import web_support

from ductline.engine import record
from ductline.engine.stop import expire
from ductline.model.outcomes import Ended
from ductline.model.states import AttemptResult
from ductline.store import Store


def read_events(client, run_id: str, query: str = "", on_event=None) -> list[tuple[str, dict]]:
    events: list[tuple[str, dict]] = []
    with client.stream("GET", f"/api/runs/{run_id}/events{query}") as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in answer.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                assert name is not None
                events.append((name, json.loads(line[len("data: "):])))
                if on_event is not None:
                    on_event(name, events[-1][1])
                name = None
    return events


def test_halted_run_streams_its_attempts_then_ends_halted(client, seeded):
    events = read_events(client, seeded["halted"])
    assert [name for name, _ in events] == ["workflow_start", "step_start", "step_end", "step_start", "step_end",
                                           "workflow_end"]
    starts = [data for name, data in events if name == "step_start"]
    assert [(d["step"], d["attempt"]) for d in starts] == [("always_fails", 1), ("always_fails", 2)]
    end = [data for name, data in events if name == "step_end"][-1]
    assert (end["result"], end["error_type"], end["error"]) == ("errored", "ValueError", "bad input")
    assert events[-1][1]["status"] == "halted" and events[-1][1]["halt_reason"] == "job_retries_exhausted"
    assert all(data["run_id"] == seeded["halted"] for _, data in events)


def test_completed_run_ends_completed(client, seeded):
    events = read_events(client, seeded["completed"])
    ends = [d["step"] for name, d in events if name == "step_end"]
    assert ends == ["add_one", "double", "async_square"]
    assert events[-1] == ("workflow_end", {**events[-1][1], "status": "completed"})


def test_run_past_its_deadline_ends_with_status_timeout(client, sqlite_store: Store):
    handle = rt_app.deadline_chain.trigger(1, database=sqlite_store)
    (quick,) = web_support.claim(sqlite_store, rt_app.deadline_chain)
    web_support.succeed(sqlite_store, rt_app.deadline_chain, quick, 1)
    web_support.claim(sqlite_store, rt_app.deadline_chain)  # "stuck" is running when the deadline fires
    with sqlite_store.transaction() as tx:
        assert expire(tx, rt_app.deadline_chain.definition(), handle.id)
    events = read_events(client, handle.id)
    assert events[-1][0] == "workflow_end" and events[-1][1]["status"] == "timeout"
    stuck_end = [d for name, d in events if name == "step_end" and d["step"] == "stuck"]
    assert stuck_end and stuck_end[0]["error_type"] == "TimeoutError"
    page = client.get(f"/runs/{handle.id}").text
    assert "Failed: run deadline exceeded" in page and "The run deadline of 2 s passed." in page


def test_stream_follows_a_live_run_until_it_completes(client, sqlite_store: Store):
    handle = rt_app.chain.trigger(3, database=sqlite_store)
    (first,) = web_support.claim(sqlite_store, rt_app.chain)
    finishing = threading.Event()
    drivers: list[threading.Thread] = []

    def drive_rest() -> None:
        web_support.succeed(sqlite_store, rt_app.chain, first, 4)
        while True:
            jobs = web_support.claim(sqlite_store, rt_app.chain)
            if not jobs:
                return
            web_support.succeed(sqlite_store, rt_app.chain, jobs[0], 8)

    def on_event(name: str, data: dict) -> None:
        if name == "step_start" and not finishing.is_set():  # the stream is live: finish the run now
            finishing.set()
            drivers.append(threading.Thread(target=drive_rest))
            drivers[0].start()

    events = read_events(client, handle.id, on_event=on_event)
    drivers[0].join(10)
    names = [name for name, _ in events]
    assert names[0] == "workflow_start" and names[-1] == "workflow_end"
    assert names.count("step_start") == names.count("step_end") == 3
    assert events[-1][1]["status"] == "completed"
    assert handle.status() == "completed"


def test_since_skips_what_the_page_already_shows(client, seeded, sqlite_store: Store):
    run = sqlite_store.get_run(seeded["halted"])
    events = read_events(client, seeded["halted"], f"?since={run['finished_ms']}")
    assert [name for name, _ in events] == ["workflow_end"]


def test_unknown_run_and_bad_since_are_refused_before_streaming(client, seeded):
    assert client.get("/api/runs/nope/events").status_code == 404
    answer = client.get(f"/api/runs/{seeded['halted']}/events?since=yesterday")
    assert answer.status_code == 400 and "since must be milliseconds" in answer.json()["error"]


def test_cancelled_run_ends_cancelled_and_its_page_says_so(client, seeded, sqlite_store: Store):
    from ductline.operations.cancel import cancel_run

    cancel_run(sqlite_store, seeded["running"], rt_app.fan.definition())
    events = read_events(client, seeded["running"])
    assert events[-1][0] == "workflow_end" and events[-1][1]["status"] == "cancelled"
    page = client.get(f"/runs/{seeded['running']}").text
    assert "<h2 id=\"reason-h\">Cancelled</h2>" in page
    assert 'data-step="gather" data-state="skipped"' in page or 'data-step="gather" data-state="not_reached"' in page


def test_run_that_halted_then_passed_its_deadline_names_no_step_stopped_in_flight(client, sqlite_store: Store):
    # The step failed on its own step timeout (a TimeoutError too) and halted the
    # run; the deadline passed later while the run waited for a retry.
    pipeline = rt_app.halts_before_deadline
    handle = pipeline.trigger(1, database=sqlite_store)
    (quick,) = web_support.claim(sqlite_store, pipeline)
    web_support.succeed(sqlite_store, pipeline, quick, 1)
    (failing,) = web_support.claim(sqlite_store, pipeline)
    with sqlite_store.transaction() as tx:
        done = record.failure(tx, pipeline.definition(), web_support._attempt(failing),
                              Ended(AttemptResult.TIMED_OUT, "TimeoutError", "step exceeded its timeout of 1 s"), None)
    assert done.outcome == "failed"
    assert sqlite_store.get_run(handle.id)["status"] == "halted"
    with sqlite_store.transaction() as tx:
        assert expire(tx, pipeline.definition(), handle.id)
    page = html.unescape(client.get(f"/runs/{handle.id}").text)
    assert "Failed: run deadline exceeded" in page
    chain = re.findall(r"<li>(.*?)</li>", page.split('<ol class="chain">')[1].split("</ol>")[0])
    assert chain[0] == "The run deadline of 2 s passed."
    assert chain[1].startswith("It had halted at ")
    assert chain[1].endswith("(job_retries_exhausted) after step fails_at_once failed (TimeoutError: step exceeded "
                             "its timeout of 1 s); the deadline then passed while it waited for a retry.")
    assert not any("In-flight attempts stopped" in line for line in chain)
    assert not any("exceeded its deadline" in line for line in chain)  # the deadline is said once
