"""Running the examples as a user would: the ``ductline`` CLI in subprocesses, on a
SQLite file of the test's own (import as `examples_helpers`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no ductline settings but the ones given."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DUCTLINE_")}
    return {**base, **extra}


def ductline(*args: str, cwd: Path, extra_env: dict[str, str] | None = None,
             check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "ductline", *args], cwd=cwd, env=env(**(extra_env or {})),
                          capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, f"ductline {' '.join(args)} exited {proc.returncode}\n" \
                                     f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def last_json(proc: subprocess.CompletedProcess[str]) -> Any:
    """The JSON a command printed: its whole stdout (``trigger --json``) or, after a
    progress display, its last line (``run --json``)."""
    text = proc.stdout.strip()
    assert text, f"no stdout\nstderr:\n{proc.stderr}"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(text.splitlines()[-1])


def show(run_id: str, database: str, cwd: Path) -> dict[str, Any]:
    view: dict[str, Any] = json.loads(ductline("show", run_id, "--json", "--database", database, cwd=cwd).stdout)
    return view


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
