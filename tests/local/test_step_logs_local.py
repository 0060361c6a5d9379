"""Step logs in the in-process executor: every kind of step (child, thread, async)
captures its records per attempt into `StepResult`; levels per step and per run;
the per-attempt cap; unknown levels are clear errors wherever they are given."""

from __future__ import annotations

import logging
import subprocess
import sys

import log_app
import pytest

import ductline
from ductline import Pipeline
from ductline.config import load_settings
from ductline.errors import ConfigurationError
from ductline.execution import steplog

log = logging.getLogger("tests.local.steplogs")


def thread_step(x):
    log.info("thread %s", x)
    print("thread print")
    return x


async def async_step(x):
    log.warning("async %s", x)
    print("async print")
    return x


in_parent = Pipeline("local_logs_in_parent").start(thread_step, isolation="thread").chain(to=async_step)


def entries(result, step):
    return [(e.level, e.logger, e.message) for e in result.step(step).logs]


def test_child_steps_capture_logging_print_and_stderr_per_attempt():
    result = ductline.execute(log_app.talk, 1)
    assert result.status == "completed"
    chatty = entries(result, "chatty")
    assert chatty[:5] == [("INFO", "log_app.steps", "starting with 1"), ("INFO", "stdout", "printed line one"),
                          ("INFO", "stdout", "printed line two"), ("WARNING", "stderr", "to stderr"),
                          ("WARNING", "log_app.steps", "from a thread of the step")]
    assert entries(result, "verbose") == [("DEBUG", "log_app.steps", "debug kept: this step logs at DEBUG")]
    assert entries(result, "quiet") == [("ERROR", "log_app.steps", "error kept")]
    first = result.step("chatty").history[0].logs[0]
    began = result.step("chatty").started_at
    assert first.at.tzinfo is not None and began.replace(microsecond=began.microsecond // 1000 * 1000) <= first.at


def test_each_attempt_keeps_its_own_records():
    result = ductline.execute(log_app.retrying, 1, retry_delay=0)
    history = result.step("flaky").history
    assert [[e.message for e in a.logs] for a in history] == [["attempt 1 here"], ["attempt 2 here"]]


def test_thread_and_async_steps_are_captured_in_the_parent(capsys):
    result = ductline.execute(in_parent, 3)
    assert entries(result, "thread_step") == [("INFO", "tests.local.steplogs", "thread 3"),
                                               ("INFO", "stdout", "thread print")]
    assert entries(result, "async_step") == [("WARNING", "tests.local.steplogs", "async 3"),
                                              ("INFO", "stdout", "async print")]
    assert "thread print" not in capsys.readouterr().out  # captured, not printed
    print("after the run")  # the streams are back
    assert capsys.readouterr().out == "after the run\n"


def test_run_level_applies_to_steps_without_their_own():
    result = ductline.execute(log_app.talk, 1, log_level="warning")
    levels = {level for level, _, _ in entries(result, "chatty")}
    assert levels == {"WARNING", "ERROR"}
    assert entries(result, "verbose") == [("DEBUG", "log_app.steps", "debug kept: this step logs at DEBUG")]


def test_the_cap_cuts_and_marks(monkeypatch):
    monkeypatch.setenv("DUCTLINE_STEP_LOG_MAX_BYTES", "4096")
    result = ductline.execute(log_app.flooding, 2)
    assert result.output == {"survived": 2}
    logs = result.step("flood").logs
    assert sum(len(e.message.encode()) for e in logs[:-1]) == 4096
    assert logs[-1].logger == "ductline" and logs[-1].message.startswith("log cut: this attempt's log passed its cap "
                                                                          "of 4096 bytes;")


def test_capture_cuts_a_single_long_record_at_the_cap():
    batches = []
    capture = steplog.Capture(batches.extend, "DEBUG", max_bytes=10)
    capture.add(logging.INFO, "x", "abcdefghijklmnop")
    capture.add(logging.INFO, "x", "more")
    capture.close()
    assert [r.message for r in batches] == ["abcdefghij", steplog.cut_message(10, 10)]


@pytest.mark.parametrize("value, error", [("loud", ValueError), (10, TypeError)])
def test_an_unknown_level_is_a_clear_error_at_definition_and_execution(value, error):
    with pytest.raises(error, match="log_level"):
        Pipeline("bad_level").start(log_app.chatty, log_level=value)
    with pytest.raises(error, match="log_level"):
        ductline.execute(log_app.talk, 1, log_level=value)


def test_an_unknown_worker_level_is_a_configuration_error(monkeypatch):
    monkeypatch.setenv("DUCTLINE_STEP_LOG_LEVEL", "verbose")
    with pytest.raises(ConfigurationError, match="unknown step_log_level 'verbose'; use one of DEBUG, INFO"):
        load_settings()
    done = subprocess.run([sys.executable, "-m", "ductline", "worker", "--app", log_app.__file__,
                           "--database", "sqlite:///:memory:"], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "DUCTLINE_STEP_LOG_LEVEL": "verbose"})
    assert done.returncode != 0
    assert "unknown step_log_level 'verbose'" in done.stderr
