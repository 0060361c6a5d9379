"""Terminal-safe logs, on both backends: what a step writes (ESC/CSI/OSC sequences,
a carriage return, C1 controls, a bidi override, a forged log line) never reaches a
terminal raw. ``ductline logs`` (piped or on a terminal), the worker's text log,
``ductline run`` and ``ductline show`` show it escaped, with a record's further lines
indented; the JSON formats are ASCII JSON that decodes back to what the step wrote."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import cli_app
from helpers import FAST_ENV, stop_worker
from hypothesis import given, strategies as st

from ductline import safetext

APP = cli_app.__file__
# Raw bytes no output may hold: ESC, BEL, CR, the C1 CSI and OSC, a bidi override.
RAW = (b"\x1b", b"\x07", b"\r", "\x9b".encode(), "\x9d".encode(), "\u202e".encode())
FORGED_LINE = cli_app.FORGED.lstrip("\n")


def assert_inert(output: bytes) -> None:
    found = [raw for raw in RAW if raw in output]
    assert not found, (found, output[-2000:])
    assert not any(line.startswith(FORGED_LINE.encode()) for line in output.splitlines()), output[-2000:]


def ductline(db_url: str, *words: str, columns: str = "80") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ductline", *words, "--database", db_url], capture_output=True,
                          timeout=120, env={**os.environ, "COLUMNS": columns})


def hostile_run(store, db_url, tmp_path, *options: str) -> tuple[str, bytes]:
    """Run the hostile step under a real worker; the run's id and the worker's log."""
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "ductline", *options, "worker", "--app", APP, "--database",
                                 db_url, "--concurrency", "1"], env={**os.environ, **FAST_ENV}, stderr=err)
    try:
        handle = cli_app.hostile_pipeline.trigger(1, database=store)
        assert handle.wait(120) == "halted"
    finally:
        stop_worker(proc)
    return handle.id, log_path.read_bytes()


def test_the_workers_text_log_and_ductline_logs_show_step_text_escaped(store, db_url, tmp_path):
    run_id, worker_log = hostile_run(store, db_url, tmp_path)
    assert_inert(worker_log)
    text = worker_log.decode()
    assert "logged before\\x1b]0;pwned\\x07\\x1b]52;c;ZWNobyBwd25lZA==\\x07\\x1b[2K" in text, text[-3000:]
    assert "\\x9b31m\\rover\\u202eevil\n    " + FORGED_LINE in text, text[-3000:]  # indented: no line of its own
    assert "Job errored: ValueError: failed before\\x1b]0;pwned" in text, text[-3000:]

    logs = ductline(db_url, "logs", run_id)
    assert logs.returncode == 0, logs.stderr
    assert_inert(logs.stdout)
    printed = logs.stdout.decode()
    assert "WARNING cli_app.steps: logged before\\x1b]0;pwned\\x07" in printed, printed
    assert "INFO stdout: printed \\x1b]0;pwned\\x07\\x1b[2K\\x1b[1;1H\\roverwritten" in printed, printed
    assert "WARNING stderr: to stderr \\x1b]52;c;ZWNobyBwd25lZA==\\x07\\x9b31m" in printed, printed

    shown = ductline(db_url, "show", run_id)  # 80 columns: the error is wrapped
    assert shown.returncode == 0, shown.stderr
    assert_inert(shown.stdout)
    assert "ValueError: failed" in shown.stdout.decode()
    wide = ductline(db_url, "show", run_id, columns="200")
    assert_inert(wide.stdout)
    assert "ValueError: failed before\\x1b]0;pwned" in wide.stdout.decode()


def test_ductline_logs_on_a_terminal_shows_step_text_escaped(store, db_url, tmp_path):
    run_id, _ = hostile_run(store, db_url, tmp_path)
    main, secondary = pty.openpty()
    with open(tmp_path / "logs.err", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "ductline", "logs", run_id, "--database", db_url],
                                stdout=secondary, stderr=err)
    os.close(secondary)
    output = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: every writer of the terminal is gone
            break
        if not chunk:
            break
        output += chunk
    os.close(main)
    assert proc.wait(60) == 0, (tmp_path / "logs.err").read_text()
    # The terminal turns each "\n" into "\r\n" (onlcr); no other carriage return.
    output = output.replace(b"\r\n", b"\n")
    assert b"logged before\\x1b]0;pwned\\x07" in output, output
    assert_inert(output)


def test_json_lines_are_ascii_and_decode_to_what_the_step_wrote(store, db_url, tmp_path):
    run_id, worker_log = hostile_run(store, db_url, tmp_path, "--log-format", "json")
    lines = [line for line in worker_log.splitlines() if line.startswith(b"{")]
    assert all(32 <= byte < 127 for line in lines for byte in line), "a raw control or non-ASCII byte"
    forwarded = [json.loads(line) for line in lines if b"logged before" in line]
    assert forwarded and forwarded[0]["message"] == f"logged {cli_app.HOSTILE}", forwarded

    logs = ductline(db_url, "logs", run_id, "--json")
    assert logs.returncode == 0, logs.stderr
    records = logs.stdout.splitlines()
    assert records and all(32 <= byte < 127 for line in records for byte in line)
    messages = [json.loads(line)["message"] for line in records]
    assert f"logged {cli_app.HOSTILE}" in messages, messages


def test_ductline_run_prints_the_halting_error_escaped(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ductline", "run", f"{APP}:hostile_pipeline", "--args", "[1]",
                           "--database", f"sqlite:///{tmp_path / 'd.db'}"], capture_output=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, **FAST_ENV, "COLUMNS": "80"})
    assert done.returncode == 1, done.stderr
    assert_inert(done.stdout + done.stderr)
    assert "  step hostile failed after 1 attempt: ValueError: failed before\\x1b]0;pwned\\x07" \
        in done.stderr.decode(), done.stderr


UNSAFE = {*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F),
          *range(0x2066, 0x206A), *range(0xD800, 0xE000)}


@given(st.text(st.characters(codec=None)))
def test_escaped_text_holds_no_unsafe_character_and_encodes(text):
    for newlines in (True, False):
        shown = safetext.printable(text, newlines=newlines)
        assert not {ord(c) for c in shown} & (UNSAFE | (set() if newlines else {0x09, 0x0A}))
        shown.encode("utf-8")  # a lone surrogate would raise here
    if not {ord(c) for c in text} & UNSAFE:
        assert safetext.printable(text) == text  # safe text is left alone


def test_ductline_run_prints_an_output_of_any_text_escaped_and_exits_0(tmp_path):
    # A lone surrogate cannot be written to a UTF-8 stdout, a C1 control would act on
    # the terminal: the output is shown as ASCII JSON, as `ductline show` shows it.
    done = subprocess.run([sys.executable, "-m", "ductline", "run", f"{APP}:anything_pipeline",
                           "--args", r'["a\ud800b\u009b[31mc\u00e9"]', "--database", f"sqlite:///{tmp_path / 'd.db'}"],
                          capture_output=True, timeout=300, cwd=tmp_path, env={**os.environ, **FAST_ENV})
    assert done.returncode == 0, done.stderr
    assert_inert(done.stdout + done.stderr)
    assert json.loads(done.stdout) == ["a\ud800b\x9b[31mc\u00e9"], done.stdout
