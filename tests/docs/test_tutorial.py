"""The tutorial's shell steps, as a reader types them: make the input, run the
pipeline to completion, look at it with ``show`` and open its dashboard page."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from helpers import stop_worker, wait_for
from test_code_blocks import REPO, read_blocks

TUTORIAL = REPO / "docs" / "tutorial.md"


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("DUCTLINE_")}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "ductline", *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"ductline {' '.join(args)}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> tuple[int, str] | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode("utf-8")
    except OSError:
        return None


@pytest.mark.timeout(300)  # processes that start and stop: slow on a loaded machine
def test_the_tutorial_from_first_run_to_dashboard_page(tmp_path: Path) -> None:
    blocks = read_blocks(TUTORIAL)
    app = next(b for b in blocks if b.title == "app.py")
    (tmp_path / "app.py").write_text(app.code, encoding="utf-8")
    shell = "\n".join(b.code for b in blocks if b.language == "sh")
    run_command = re.search(r"^ductline run (\S+) --args '(.+)'$", shell, re.M)
    assert run_command, "the tutorial shows a `ductline run` command"

    subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=_env(), check=True, timeout=60)
    proc = _cli("run", run_command[1], "--args", run_command[2], "--json", cwd=tmp_path)
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    assert run["status"] == "completed"
    shown = next(b.code for b in blocks if b.language == "text" and '"files"' in b.code)
    assert json.loads(shown[shown.index("{"):]) == run["output"]     # the output the page shows

    _cli("runs", cwd=tmp_path)
    _cli("show", run["run_id"][:6], cwd=tmp_path)

    port = _free_port()
    dashboard = subprocess.Popen([sys.executable, "-m", "ductline", "dashboard", "--app", "app.py", "--port",
                                  str(port)], cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
    try:
        page = wait_for(lambda: _get(f"http://127.0.0.1:{port}/runs/{run['run_id']}"), timeout=60)
        assert isinstance(page, tuple)
        status, html = page
        assert status == 200 and run["run_id"] in html and "count_words" in html
    finally:
        stop_worker(dashboard)
