"""``ductline.execute`` in a program that configured no logging prints nothing of
its own (a library's records go to the application's handlers, and nowhere without
them): Python's last-resort handler used to print ductline's warnings bare, without
the run they were about. With logging configured, each record about a job carries
its run id, job id, step and attempt, as on a worker."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent('''
    import json
    import logging
    import sys

    import ductline

    def fails(x):
        logging.getLogger("shop").warning("step says %s", x)
        raise ValueError("boom")

    pipeline = ductline.Pipeline("execute_logging").start(fails, max_retry=1, retry_delay=0)

    if __name__ == "__main__":
        if sys.argv[1:] == ["configured"]:
            from ductline.logs import TextFormatter
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(TextFormatter())
            logging.getLogger().addHandler(handler)
        result = ductline.execute(pipeline, 7)
        print(json.dumps({"status": result.status, "run_id": result.metadata["run_id"],
                          "logs": [e.message for e in result.step("fails").logs]}))
''')


def run(tmp_path: Path, *args: str) -> tuple[dict[str, object], str]:
    script = tmp_path / "quiet_run.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_execute_prints_nothing_when_no_logging_is_configured(tmp_path: Path) -> None:
    found, stderr = run(tmp_path)
    assert found["status"] == "halted"
    assert found["logs"] and set(found["logs"]) == {"step says 7"}  # captured in the result all the same
    assert stderr == ""


def test_configured_logging_gets_each_line_with_its_run_and_step(tmp_path: Path) -> None:
    found, stderr = run(tmp_path, "configured")
    lines = [line for line in stderr.splitlines() if "Job errored" in line or "Pipeline halted" in line]
    assert len(lines) == 2, stderr
    for line in lines:
        assert f"run_id={found['run_id']}" in line and "step=fails" in line, line
