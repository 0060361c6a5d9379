"""A worker logs each run it ends in one line, on both backends: pipeline, run id,
status (with its reason) and duration, at the level of ``run_log_level`` (INFO by
default), in the text and the JSON log formats."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import cli_app
import pytest
from helpers import FAST_ENV, stop_worker

from ductline.config import load_settings
from ductline.errors import ConfigurationError
from ductline.observability.runlog import run_seconds

APP = cli_app.__file__


def worker_log(store, db_url, tmp_path, *options: str, env: dict[str, str] | None = None) -> tuple[list, str]:
    """Run a completing and a halting run under a real worker; their handles and its log."""
    path = tmp_path / "worker.log"
    with open(path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "ductline", *options, "worker", "--app", APP, "--database",
                                 db_url, "--concurrency", "1"], env={**os.environ, **FAST_ENV, **(env or {})},
                                stderr=err)
    try:
        done = cli_app.chain.trigger(1, database=store)
        halted = cli_app.gives_up_pipeline.trigger(1, database=store)
        assert (done.wait(120), halted.wait(120)) == ("completed", "halted")
    finally:
        stop_worker(proc)
    return [done, halted], path.read_text()


def test_each_finished_run_is_one_info_line(store, db_url, tmp_path):
    (done, halted), text = worker_log(store, db_url, tmp_path)
    lines = [line for line in text.splitlines() if " ductline.runs: " in line]
    assert len(lines) == 2, text[-3000:]
    seconds = {h.id: run_seconds(store.get_run(h.id)) for h in (done, halted)}
    assert re.search(rf" INFO ductline\.runs: Run completed: pipeline cli_chain in {seconds[done.id]:.3f} s "
                     rf"\[run_id={done.id}\]$", lines[0]), lines
    assert re.search(rf" INFO ductline\.runs: Run halted \(job_retries_exhausted\): pipeline cli_gives_up in "
                     rf"{seconds[halted.id]:.3f} s \[run_id={halted.id}\]$", lines[1]), lines


def test_the_json_line_has_fields_of_its_own(store, db_url, tmp_path):
    (done, _), text = worker_log(store, db_url, tmp_path, "--log-format", "json")
    [line] = [json.loads(x) for x in text.splitlines() if x.startswith("{") and '"ductline.runs"' in x
              and done.id in x]
    assert (line["level"], line["run_id"], line["pipeline"], line["status"]) == (
        "INFO", done.id, "cli_chain", "completed")
    assert line["duration_seconds"] == run_seconds(store.get_run(done.id))


def test_its_level_is_a_setting(store, db_url, tmp_path):
    (done, _), text = worker_log(store, db_url, tmp_path, env={"DUCTLINE_RUN_LOG_LEVEL": "debug"})
    assert " ductline.runs: " not in text  # below the worker's --log-level INFO
    (done, _), text = worker_log(store, db_url, tmp_path, "--log-level", "DEBUG",
                                 env={"DUCTLINE_RUN_LOG_LEVEL": "debug"})
    assert re.search(rf" DEBUG ductline\.runs: Run completed: pipeline cli_chain in [0-9.]+ s \[run_id={done.id}\]",
                     text), text[-3000:]


def test_an_unknown_level_is_refused_naming_its_source(monkeypatch):
    monkeypatch.setenv("DUCTLINE_RUN_LOG_LEVEL", "loud")
    with pytest.raises(ConfigurationError, match="DUCTLINE_RUN_LOG_LEVEL: unknown run_log_level 'loud'"):
        load_settings()
    monkeypatch.setenv("DUCTLINE_RUN_LOG_LEVEL", "warning")
    assert load_settings().run_log_level == "WARNING"


def test_run_ends_queued_together_are_read_in_one_query(store, caplog):
    """A draining worker ends runs faster than it could read them one by one: the
    log thread reads every end queued at that moment in one query."""
    import logging

    from ductline.observability.runlog import RunLog

    handles = [cli_app.chain.trigger(i, database=store) for i in range(3)]
    reads: list[list[str]] = []
    real = store.run_ends
    store.run_ends = lambda ids: (reads.append(list(ids)), real(ids))[1]  # counts the real reads
    log = RunLog(store)
    with caplog.at_level(logging.INFO, logger="ductline.runs"):
        log.write_all([("completed", h.id, "cli_chain", None) for h in handles] + [("failed", "no-such-run", "x", None)])
    assert reads == [sorted([h.id for h in handles] + ["no-such-run"])]
    lines = [r.getMessage() for r in caplog.records if r.name == "ductline.runs"]
    assert len(lines) == 4 and lines[0] == "Run completed: pipeline cli_chain"  # pending runs: no duration yet
    assert store.run_ends([handles[0].id])[handles[0].id]["created_ms"] == store.get_run(handles[0].id)["created_ms"]


def test_the_log_thread_starts_with_the_worker_not_at_its_first_run_end(store):
    """A worker's threads are all there once it runs: the run log's thread does not
    appear later, at the first run that ends (a waiting job costs no thread)."""
    import logging
    import threading

    from ductline.observability import runlog

    logging.getLogger("ductline.runs").setLevel(logging.INFO)
    try:
        runlog.install(store)
        assert any(t.name == "ductline-run-log" for t in threading.enumerate())
    finally:
        runlog.uninstall()
        logging.getLogger("ductline.runs").setLevel(logging.NOTSET)
