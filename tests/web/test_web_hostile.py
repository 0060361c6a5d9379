"""No stored value can break a page or an API answer, and none reaches a reader
unescaped: hostile text (lone surrogates, NUL, terminal escapes, carriage returns,
bidirectional overrides, huge strings, malformed JSON and tags) written into every
field a page or endpoint shows, on both backends; every page and endpoint answers
below 500, pages hold no control character and API bodies are ASCII."""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterator

import pytest
import rt_app
import web_support
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_web_actions import log_in
from web_support import TOKEN, Raw

from ductline.store import Store
from ductline.web import create_app

# What a page may never contain: every control character but newline and tab (the
# page's own text has no carriage return), and the bidirectional overrides.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
NASTY = ["\x1b]0;owned\x07", "\x1b]52;c;ZXZpbA==\x07", "\x1b[2J\x1b[H", "ok\r\x1b[Kforged line", "\x9b31m",
         "\u202egnp.exe", "\u2066x\u2069", "\x00", "\x7f\x08", "<script>alert(1)</script>", "{{ 7 * 7 }}",
         "%s%n", "../../etc", '"\'\\', "é ü 中 🙂", "a\u2028b", "", " "]
HUGE = ["x" * 300_000, "\x1b[31m" * 20_000, "é" * 100_000]
HUGE_FIELDS = ["args", "output", "job_output", "error", "traceback", "boundary", "halt_reason", "skip_reason"]
TAGS = ["dataclass", "pydantic", "enum", "tuple", "datetime", "date", "uuid", "decimal", "payload", "zzz"]


def text_of(backend: str, *, surrogates: bool = False) -> st.SearchStrategy[str]:
    """Hostile text a column of ``backend`` can hold (PostgreSQL: no NUL; a text
    column: no lone surrogate, which only JSON escapes can carry)."""
    excluded = [] if surrogates else ["Cs"]
    chars = st.characters(exclude_categories=excluded,
                          exclude_characters="\x00" if backend == "postgres" and not surrogates else None)
    nasty = [n for n in NASTY if backend == "sqlite" or "\x00" not in n]
    return st.one_of(st.text(chars, max_size=30), st.sampled_from(nasty),
                     st.lists(st.sampled_from(nasty), min_size=2, max_size=4).map("".join))


def names(backend: str) -> st.SearchStrategy[str]:
    return text_of(backend).filter(lambda s: 0 < len(s) < 500)


def json_values() -> st.SearchStrategy[Any]:
    """JSON values with hostile strings (lone surrogates included: JSON escapes them)
    and tagged objects of every kind, well formed or not."""
    strings = text_of("postgres", surrogates=True)
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), strings)

    def tagged(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.builds(lambda tag, kind, body, key: {"__ductline__": tag, "type": kind, key: body},
                         st.one_of(st.sampled_from(TAGS), strings, st.integers()), st.one_of(strings, st.none()),
                         inner, st.sampled_from(["value", "fields", "items", "id"]))

    return st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(strings, inner, max_size=4), tagged(inner)), max_leaves=12)


def stored_json(backend: str) -> st.SearchStrategy[str]:
    """Text of a JSON column: JSON of a hostile value, or not JSON at all."""
    return st.one_of(json_values().map(json.dumps), text_of(backend),
                     st.just("[" * 5000 + "]" * 5000), st.just('{"__ductline__":"payload","id":"' + "0" * 32
                                                               + '","size":10}'))


@pytest.fixture
def hostile(backend: str, db_url: str, store: Store) -> Iterator[tuple[Callable[..., Any], Raw, Store]]:
    from starlette.testclient import TestClient

    with TestClient(create_app(store, token=TOKEN, poll_seconds=0.01), base_url="http://localhost",
                    raise_server_exceptions=False) as client:
        log_in(client)  # logged in, the pages draw their forms too
        yield client, Raw(backend, db_url), store


def hostile_fields(backend: str) -> st.SearchStrategy[dict[str, Any]]:
    text = text_of(backend)
    return st.fixed_dictionaries({
        "args": stored_json(backend), "output": stored_json(backend), "metadata": stored_json(backend),
        "halt_reason": text, "key": text, "pipeline": st.one_of(st.just(None), names(backend)),
        "job_output": stored_json(backend), "boundary": text, "skip_reason": text, "skip_root": text,
        "step": st.one_of(st.just(None), names(backend)), "scope": text, "limit_key": text,
        "error_type": text, "error": text, "traceback": text, "worker_id": text,
        "log": st.lists(st.tuples(text, text, text), min_size=1, max_size=3),
        "host": text, "schedule": st.tuples(names(backend), text, stored_json(backend)),
        # one field at a time gets a huge value (each page would be megabytes otherwise)
        "huge": st.one_of(st.none(), st.tuples(st.sampled_from(HUGE_FIELDS), st.sampled_from(HUGE))),
    })


PAGES = ["/", "/runs", "/runs?pipeline={pipeline_q}", "/runs/{run_id}", "/runs/{run_id}?all={step_q}",
         "/runs/{prefix}", "/charts", "/charts?window=day&pipeline={pipeline_q}"]
API = ["/api/overview", "/api/runs", "/api/runs?pipeline={pipeline_q}", "/api/runs/{run_id}",
       "/api/runs/{run_id}/logs", "/api/runs/{run_id}/logs?step={step_q}", "/api/runs/{run_id}/events?since=0",
       "/api/workers", "/api/pipelines", "/api/charts", "/api/charts?window=day&pipeline={pipeline_q}",
       "/api/openapi.json", "/healthz", "/readyz"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_no_stored_value_breaks_a_page_or_an_answer(hostile, backend, data):
    from urllib.parse import quote

    client, raw, store = hostile
    fields = data.draw(hostile_fields(backend))
    if fields["huge"] is not None:
        field, value = fields["huge"]
        fields[field] = json.dumps([value]) if field in ("args", "output", "job_output") else value
    run_id = web_support.halted_after_a_boundary(store).id
    (job,) = store.run_jobs(run_id)
    (attempt, *_) = store.run_attempts(run_id)
    pipeline = fields["pipeline"] or rt_app.unsafe.name
    step = fields["step"] or job["step"]
    logs = [("INSERT INTO ductline_step_logs (job_id, attempt, seq, run_id, at_ms, level, logger, message) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (job["id"], attempt["attempt"], 1000 + i, run_id, 1, *record))
            for i, record in enumerate(fields["log"])]
    name, cron, args = fields["schedule"]
    raw.run([
        ("UPDATE ductline_runs SET args = ?, output = ?, metadata = ?, halt_reason = ?, idempotency_key = ?, "
         "pipeline = ? WHERE id = ?", (fields["args"], fields["output"], fields["metadata"], fields["halt_reason"],
                                       fields["key"] + run_id, pipeline, run_id)),
        ("UPDATE ductline_jobs SET output = ?, boundary = ?, skip_reason = ?, skip_root = ?, step = ?, scope = ?, "
         "limit_key = ?, pipeline = ? WHERE id = ?",
         (fields["job_output"], fields["boundary"], fields["skip_reason"], fields["skip_root"], step,
          fields["scope"], fields["limit_key"], pipeline, job["id"])),
        ("UPDATE ductline_attempts SET error_type = ?, error = ?, traceback = ?, worker_id = ? WHERE run_id = ?",
         (fields["error_type"], fields["error"], fields["traceback"], fields["worker_id"], run_id)),
        *logs,
        ("DELETE FROM ductline_workers", ()),
        ("INSERT INTO ductline_workers (id, host, pid, concurrency, status, started_ms, heartbeat_ms) "
         "VALUES (?, ?, 1, 1, 'running', 1, 1)", (fields["host"][:200] + "-w", fields["host"])),
        ("DELETE FROM ductline_schedules", ()),
        ("INSERT INTO ductline_schedules (name, pipeline, cron, args, next_fire_ms, last_run_id, updated_ms) "
         "VALUES (?, ?, ?, ?, 1, ?, 1)", (name, pipeline, cron, args, run_id)),
    ])
    values = {"run_id": run_id, "prefix": run_id[:8], "pipeline_q": quote(pipeline[:300], safe=""),
              "step_q": quote(step[:300], safe="")}
    for path in PAGES + API:
        url = path.format(**values)
        answer = client.get(url)
        assert answer.status_code < 500, (url, answer.status_code, answer.text[:500])
        if path in PAGES and answer.headers.get("content-type", "").startswith("text/html"):
            found = FORBIDDEN.search(answer.text)
            assert found is None, (url, repr(answer.text[max(0, found.start() - 80):found.end() + 80]))
        else:
            assert answer.content.isascii(), (url, answer.content[:300])


def test_a_step_output_tagged_payload_that_is_no_reference_is_shown_not_a_500(backend, db_url, store: Store):
    """Found by the test above: an output stored as a value tagged "payload" without a
    payload's id made GET /api/runs/{id} answer 500 (it built a download link)."""
    from starlette.testclient import TestClient

    run_id = web_support.halted_after_a_boundary(store).id
    (job,) = store.run_jobs(run_id)
    web_support.Raw(backend, db_url).run([("UPDATE ductline_jobs SET output = ? WHERE id = ?",
                                          ('{"__ductline__": "payload", "type": "", "value": null}', job["id"]))])
    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        answer = client.get(f"/api/runs/{run_id}")
        assert answer.status_code == 200, answer.text
        (step,) = answer.json()["steps"]
        assert step["output"]["type"] == "payload" and "link" not in step["output"]
        assert client.get(f"/runs/{run_id}").status_code == 200


def test_step_text_with_terminal_escapes_and_a_lone_surrogate_shows_escaped(backend, store: Store):
    """The reported case: a lone surrogate in a run's argument and output (the run page
    and GET /api/runs/{id} answered 500), and a step's escapes in its error, traceback
    and log, which must reach neither the page nor the API or event stream raw."""
    from starlette.testclient import TestClient

    from ductline.store import steplogs

    hostile = "\ud800 \x1b]0;owned\x07 ok\r\x1b[Kforged"
    handle = rt_app.flaky_pipeline.trigger(hostile, database=store)
    (job,) = web_support.claim(store, rt_app.flaky_pipeline)
    steplogs.append(store.dialect, job.job_id, job.attempt, job.lease_token, 0,
                    [(store.now_ms(), "INFO", "stdout", "\x1b[2J\x1b[Hcleared")])
    web_support.fail(store, rt_app.flaky_pipeline, job, error="\x1b]52;c;ZXZpbA==\x07")
    (job,) = web_support.claim(store, rt_app.flaky_pipeline)  # retried at once (retry_delay=0)
    web_support.succeed(store, rt_app.flaky_pipeline, job, {"name": hostile})
    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        page = client.get(f"/runs/{handle.id}")
        assert page.status_code == 200
        assert FORBIDDEN.search(page.text) is None
        assert "\\ud800 \\u001b]0;owned\\u0007 ok\\r\\u001b[Kforged" in page.text  # the argument, JSON-quoted
        assert "\\x1b]52;c;ZXZpbA==\\x07" in page.text and "\\x1b[2J\\x1b[Hcleared" in page.text
        answer = client.get(f"/api/runs/{handle.id}")
        assert answer.status_code == 200 and answer.content.isascii()
        run = answer.json()
        assert run["args"] == ["\\ud800 \x1b]0;owned\x07 ok\r\x1b[Kforged"]  # data: storable, exact otherwise
        attempt = run["steps"][0]["attempts"][0]
        assert attempt["error"] == "\\x1b]52;c;ZXZpbA==\\x07" and "\x1b" not in attempt["traceback"]
        assert attempt["logs"][0]["message"] == "\\x1b[2J\\x1b[Hcleared"
        logs = client.get(f"/api/runs/{handle.id}/logs").json()["logs"]
        assert logs[0]["message"] == "\\x1b[2J\\x1b[Hcleared"
        assert run["output"] == {"name": "\\ud800 \x1b]0;owned\x07 ok\r\x1b[Kforged"}
        events = client.get(f"/api/runs/{handle.id}/events?since=0")
        assert events.status_code == 200 and events.content.isascii() and "\\\\x1b]52" in events.text
