"""Large payloads with real workers on both backends: the inline limit byte for byte,
out-of-line outputs reaching the next step intact (chain, expand/collapse,
divide/combine, thread isolation), the run's output via the handle and
``ductline show --json``, chunking, the hard limit, oversized child messages, and
trigger arguments.

The workers run with small limits (64 KiB inline, 2,000,000 bytes hard) so nothing
here moves more than a few MiB.
"""

from __future__ import annotations

import json
import math

import pytest

import payload_app as pa
from helpers import ductline_in_process

from ductline import PayloadTooLarge
from ductline.store import payloads
from ductline.views import run_view

INLINE = 65_536  # the `running` worker's limits (tests/payloads/conftest.py)
MAX = 2_000_000
ENV = {"DUCTLINE_PAYLOAD_INLINE_BYTES": str(INLINE), "DUCTLINE_PAYLOAD_MAX_BYTES": str(MAX)}


def _job(store, run_id, step, index=None):
    [job] = [j for j in store.run_jobs(run_id) if j["step"] == step and j["elem_index"] == index]
    return job


def _show_json(db_url, run_id):
    done = ductline_in_process("show", run_id, "--json", "--database", db_url)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_exactly_the_limit_stays_inline_one_byte_more_goes_out_of_line(running):
    store = running.store
    at = pa.relayed.trigger([INLINE, 1], database=store)
    above = pa.relayed.trigger([INLINE + 1, 2], database=store)
    assert at.wait(90) == "completed" and above.wait(90) == "completed"

    inline = _job(store, at.id, "produce")["output"]
    assert len(inline) == INLINE and json.loads(inline) == pa.blob(INLINE, 1)
    assert payloads.run_payloads(store, at.id) == []
    assert store.get_run(at.id)["output"] == inline

    ref = payloads.parse_reference(_job(store, above.id, "produce")["output"])
    assert ref is not None and ref.size == INLINE + 1
    relayed = payloads.parse_reference(_job(store, above.id, "relay")["output"])
    assert relayed is not None and relayed.size == INLINE + 1 and relayed.id != ref.id
    assert store.get_run(above.id)["output"] == payloads.reference(relayed.id, INLINE + 1)
    stored = {p["id"]: p for p in payloads.run_payloads(store, above.id)}
    assert set(stored) == {ref.id, relayed.id} and stored[ref.id]["size"] == INLINE + 1

    # The relay got produce's output byte for byte (it returned it as the run's output).
    assert at.output() == pa.blob(INLINE, 1)
    assert above.output() == pa.blob(INLINE + 1, 2)


def test_chunks_and_the_runs_output_via_handle_and_show_json(running):
    store = running.store
    size = 600_000
    handle = pa.relayed.trigger([size, 3], database=store)
    assert handle.wait(90) == "completed"
    expected = pa.blob(size, 3)
    assert handle.output() == expected
    assert _show_json(running.url, handle.id)["output"] == expected
    assert run_view(store, handle.id)["output"] == expected
    for p in payloads.run_payloads(store, handle.id):
        assert p["size"] == size
        assert p["chunks"] == math.ceil(size / payloads.CHUNK_BYTES) == 3
        assert payloads.chunk_count(store, p["id"]) == 3
        # Chunks are full 256 KiB pieces but the last; together, exactly the JSON text.
        assert b"".join(payloads.stream(store, handle.id, p["id"])) == json.dumps(expected).encode()


def test_collapse_gathers_inline_and_out_of_line_outputs_in_order(running):
    store = running.store
    specs = [[INLINE, 1], [INLINE + 1, 2], [10, 3], [300_000, 4], [INLINE - 5, 5]]
    handle = pa.expanded.trigger(specs, database=store)
    assert handle.wait(90) == "completed"
    assert handle.output() == [[s - 2, pa.digest(pa.blob(s, seed))] for s, seed in specs]
    refs = [payloads.parse_reference(_job(store, handle.id, "produce", i)["output"]) for i in range(len(specs))]
    assert [r is not None for r in refs] == [False, True, False, True, False]
    # Two out-of-line outputs, plus the collapse's gathered input (two inline outputs of
    # about 64 KiB each plus two references: above the inline limit, so stored too).
    ids = {p["id"] for p in payloads.run_payloads(store, handle.id)}
    assert len(ids) == 3 and {r.id for r in refs if r} < ids


def test_combine_gathers_a_large_and_a_small_branch(running):
    store = running.store
    handle = pa.combined.trigger([300_000, 100], database=store)
    assert handle.wait(90) == "completed"
    assert handle.output() == [[299_998, pa.digest(pa.blob(300_000, 1))], [98, pa.digest(pa.blob(100, 2))]]
    assert payloads.parse_reference(_job(store, handle.id, "large_branch")["output"]) is not None
    assert payloads.parse_reference(_job(store, handle.id, "small_branch")["output"]) is None


def test_large_expand_elements_go_out_of_line_as_inputs(running):
    store = running.store
    handle = pa.big_elements_pipeline.trigger([3, 100_000], database=store)
    assert handle.wait(90) == "completed"
    assert handle.output() == [[99_998, pa.digest(pa.blob(100_000, seed))] for seed in range(3)]
    # The list (one payload) and each element's input (three more).
    assert len(payloads.run_payloads(store, handle.id)) == 4


def test_a_thread_isolated_step_reads_its_input_the_same_way(running):
    store = running.store
    handle = pa.threaded.trigger([200_000, 7], database=store)
    assert handle.wait(90) == "completed"
    assert handle.output() == pa.blob(200_000, 7)


def test_an_output_above_the_hard_limit_fails_at_once_without_retries(running):
    store = running.store
    failing = pa.too_big.trigger([MAX + 1, 1], database=store)
    fitting = pa.too_big.trigger([MAX, 2], database=store)
    assert failing.wait(90) == "halted" and fitting.wait(90) == "completed"
    view = run_view(store, failing.id)
    assert view["halt_reason"] == "non_retryable_error"
    [attempt] = view["steps"][0]["attempts"]  # max_retry=3 is not used: the size will not change
    assert attempt["result"] == "errored"
    assert attempt["error_type"] == "ductline.PayloadTooLarge"
    assert attempt["error"] == (f"output of step 'produce': {MAX + 1} bytes of JSON exceed the limit of "
                                f"{MAX} bytes (payload_max_bytes)")
    assert payloads.run_payloads(store, failing.id) == []
    assert fitting.output() == pa.blob(MAX, 2)  # exactly the hard limit is allowed


def _peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_an_oversized_child_message_is_not_read_and_fails_the_attempt(running):
    store, proc = running.store, running.proc
    warm = pa.relayed.trigger([100, 1], database=store)
    assert warm.wait(90) == "completed"
    before = _peak_rss_kib(proc.pid)
    size = 40_000_000  # an error message (and traceback) far above what the parent reads
    loud = pa.loud.trigger(size, database=store)
    assert loud.wait(60) == "halted"
    [attempt] = run_view(store, loud.id)["steps"][0]["attempts"]
    assert attempt["error_type"] == "ductline.PayloadTooLarge"
    cap = MAX + payloads.MESSAGE_SLACK_BYTES
    assert attempt["error"] == (f"step 'loud_failure' sent the worker a message of more than {cap} bytes "
                                f"(payload_max_bytes {MAX} plus {payloads.MESSAGE_SLACK_BYTES} for the "
                                "envelope); the child was killed")
    # The parent never allocated the message, and it keeps working.
    assert _peak_rss_kib(proc.pid) - before < 20_000
    assert proc.poll() is None
    after = pa.relayed.trigger([300_000, 2], database=store)
    assert after.wait(90) == "completed" and after.output() == pa.blob(300_000, 2)


def test_large_trigger_arguments_go_out_of_line_and_oversized_ones_are_refused(running, monkeypatch):
    for name, value in ENV.items():  # the triggering process's settings decide
        monkeypatch.setenv(name, value)
    store = running.store
    value = pa.blob(200_000, 9)
    handle = pa.echoed.trigger(value, database=store)
    ref = payloads.parse_reference(store.get_run(handle.id)["args"])
    assert ref is not None and ref.size == 200_002  # the JSON list [value]
    assert handle.wait(90) == "completed" and handle.output() == value
    assert _show_json(running.url, handle.id)["args"] == [value]

    runs_before = len(store.list_runs(limit=1000))
    with pytest.raises(PayloadTooLarge) as caught:
        pa.echoed.trigger(pa.blob(MAX, 1), database=store)
    assert str(caught.value) == (f"trigger arguments: {MAX + 2} bytes of JSON exceed the limit of {MAX} "
                                 "bytes (payload_max_bytes)")
    assert isinstance(caught.value, ValueError)
    assert len(store.list_runs(limit=1000)) == runs_before  # nothing written


def test_text_that_looks_like_a_reference_is_user_data(running):
    store = running.store
    lookalike = payloads.reference("0" * 32, 5)
    value = [lookalike, {"note": lookalike}]
    handle = pa.echoed.trigger(value, database=store)
    assert handle.wait(90) == "completed"
    assert handle.output() == value
    assert not payloads.contains_references(store.get_run(handle.id)["output"])


def test_the_dashboard_shows_the_size_and_serves_the_download(running):
    from starlette.testclient import TestClient

    from ductline.web import create_app

    store = running.store
    handle = pa.relayed.trigger([600_000, 5], database=store)
    assert handle.wait(90) == "completed"
    ref = payloads.parse_reference(store.get_run(handle.id)["output"])
    link = f"/api/runs/{handle.id}/payloads/{ref.id}"
    with TestClient(create_app(store, token=None), base_url="http://localhost") as client:
        page = client.get(f"/runs/{handle.id}")
        assert page.status_code == 200
        assert "&lt;payload 585.9 KiB&gt;" in page.text and link in page.text
        download = client.get(link)
        assert download.status_code == 200 and download.headers["content-type"] == "application/json"
        assert download.content == json.dumps(pa.blob(600_000, 5)).encode()
        assert client.get(f"/api/runs/{handle.id}/payloads/{'0' * 32}").status_code == 404
        assert client.get(f"/api/runs/{handle.id}/payloads/..%2Fx").status_code == 404
        # The API's run view (like show --json) carries the whole value.
        assert client.get(f"/api/runs/{handle.id}").json()["output"] == pa.blob(600_000, 5)
