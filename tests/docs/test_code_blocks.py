"""Every ```python block of README.md and docs/ runs, as a script, and succeeds.

A page's blocks run in order, each as its own ``python`` process in one temporary
directory per page (the working directory, so the embedded SQLite default
``ductline.db`` lands there), with a time limit. A block whose fence names a file,
```` ```python title="app.py" ````, is saved under that name, so later blocks of the
same page can import it (``from app import ...``) or hand it to a command.

Fences that are not executed: ``py`` (a Python fragment, highlighted but not run),
``sh``, ``bash``, ``text``, ``toml``, ``json``, ``yaml``, ``ini``, ``dockerfile`` and
``mermaid``. Any other language fails the
test, so a typo never turns a block off.

A hidden comment on the line before a block asks for a worker while it runs:
``<!-- test: worker app.py -->`` starts ``ductline worker --app app.py`` in the
page's directory and stops it (SIGTERM to its pid) once the block has ended.
``<!-- test: env DUCTLINE_RETRY_DELAY=0 -->`` runs the block with that one setting in its
environment: a faster timing the reader does not need to see, for an example whose
outcome does not depend on it (the block's text stays what the reader runs).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
EXECUTED = "python"
NOT_EXECUTED = {"py", "sh", "bash", "text", "toml", "json", "yaml", "ini", "dockerfile", "mermaid"}
BLOCK_TIMEOUT_SECONDS = 60
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,})(?P<info>.*)$")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')
DIRECTIVE = re.compile(r"^\s*<!--\s*test:\s*(?P<verb>\w+)\s+(?P<arg>\S+)\s*-->\s*$")
# Short timings for the workers the pages start; a page's own env never needs them.
WORKER_ENV = {
    "DUCTLINE_RETRY_DELAY": "0",
    "DUCTLINE_POLL_INTERVAL": "0.2",
    "DUCTLINE_HEALTH_CHECK_INTERVAL": "0.5",
    "DUCTLINE_SHUTDOWN_GRACE_SECONDS": "5",
    "DUCTLINE_SPARE_CHILDREN": "0",  # fewer interpreter start-ups (tests/helpers.py)
}


@dataclass(frozen=True, slots=True)
class Block:
    page: Path
    line: int           # 1-based line of the opening fence
    language: str
    title: str | None
    worker: str | None  # app for a worker started while the block runs
    code: str
    env: tuple[tuple[str, str], ...] = ()  # settings the block runs with (a test: env line)


def read_blocks(page: Path) -> list[Block]:
    """The fenced code blocks of one Markdown page, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, info = match["indent"], match["fence"], match["info"].strip()
        language = info.split()[0].strip("{}.") if info else ""
        title = TITLE.search(info)
        worker = None
        env: tuple[tuple[str, str], ...] = ()
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        directive = DIRECTIVE.match(previous)
        if directive and directive["verb"] == "worker":
            worker = directive["arg"]
        elif directive and directive["verb"] == "env":
            name, equals, value = directive["arg"].partition("=")
            if not (equals and name.startswith("DUCTLINE_")):
                raise AssertionError(f"{page.relative_to(REPO)}:{i}: expected test: env DUCTLINE_NAME=value")
            env = ((name, value),)
        elif directive:
            raise AssertionError(f"{page.relative_to(REPO)}:{i}: unknown test directive {directive['verb']!r}")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        if j >= len(lines):
            raise AssertionError(f"{page.relative_to(REPO)}:{i + 1}: code block never closed")
        blocks.append(Block(page, i + 1, language, title["title"] if title else None, worker,
                            "\n".join(body) + "\n", env))
        i = j + 1
    return blocks


def executed_pages() -> list[Path]:
    return [p for p in PAGES if any(b.language == EXECUTED for b in read_blocks(p))]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCTLINE_")}
    env["PYTHONPATH"] = str(tmp_path)  # blocks import the files earlier blocks saved
    return env


def _run_script(script: Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run one block in a process group of its own, so that whatever it started (a
    worker, a dashboard) is killed with it when it overruns or leaves it behind. Its
    output goes to files: a leftover process holding a pipe open cannot stall us."""
    out, err = cwd / f"{script.stem}.stdout", cwd / f"{script.stem}.stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen([sys.executable, script.name], cwd=cwd, env=env, stdout=stdout, stderr=stderr,
                                text=True, start_new_session=True)
        try:
            proc.wait(timeout=BLOCK_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise AssertionError(f"{script.name} ran longer than {BLOCK_TIMEOUT_SECONDS} s\n"
                                 f"--- stdout\n{out.read_text()}\n--- stderr\n{err.read_text()}") from None
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)   # leftovers of a block that ended
            except ProcessLookupError:
                pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.read_text(), err.read_text())


def _run(block: Block, tmp_path: Path, index: int) -> None:
    script = tmp_path / (block.title or f"block_{index}.py")
    script.write_text(block.code, encoding="utf-8")
    where = f"{block.page.relative_to(REPO)}:{block.line}"
    env = {**_env(tmp_path), **dict(block.env)}
    worker = None
    worker_log = tmp_path / f"worker_{index}.log"
    if block.worker:
        with worker_log.open("wb") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "ductline", "worker", "--app", block.worker, "--concurrency", "2"],
                cwd=tmp_path, env={**env, **WORKER_ENV}, stdout=log, stderr=subprocess.STDOUT)
    try:
        proc = _run_script(script, tmp_path, env)
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
    log = worker_log.read_text(errors="replace") if block.worker else ""
    assert proc.returncode == 0, (
        f"the block at {where} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        + (f"\n--- worker\n{log}" if log else ""))


# A page's blocks run one after the other (each under BLOCK_TIMEOUT_SECONDS): a page
# with several workers may need more than the suite's default limit on a loaded machine.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", executed_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_python_blocks_run(page: Path, tmp_path: Path) -> None:
    blocks = [b for b in read_blocks(page) if b.language == EXECUTED]
    for index, block in enumerate(blocks, 1):
        _run(block, tmp_path, index)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_fences_are_known(page: Path) -> None:
    unknown = [f"line {b.line}: {b.language or '(none)'}" for b in read_blocks(page)
               if b.language != EXECUTED and b.language not in NOT_EXECUTED]
    assert not unknown, f"{page.relative_to(REPO)}: fences of unknown language (run or not?): {unknown}"


def test_blocks_are_found() -> None:
    """The collector sees README's blocks and a named file (guards the regexes)."""
    readme = read_blocks(REPO / "README.md")
    assert any(b.language == "sh" for b in readme)
    assert any(b.language == EXECUTED for b in readme)
    assert any(b.title for p in PAGES for b in read_blocks(p))
    assert any(b.env for p in PAGES for b in read_blocks(p))


def test_a_block_leaves_no_process_behind(tmp_path: Path) -> None:
    """What a block started dies with it (a failed block must not leave a worker running)."""
    script = tmp_path / "spawn.py"
    script.write_text("import subprocess, sys\n"
                      "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
                      "print(child.pid)\n", encoding="utf-8")
    proc = _run_script(script, tmp_path, _env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    child = int(proc.stdout.strip())

    def gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        # Killed but not yet reaped by init: a zombie counts as gone.
        with open(f"/proc/{child}/stat", encoding="ascii") as fh:
            return fh.read().split(") ")[1].startswith("Z")

    from helpers import wait_for

    wait_for(gone, timeout=30)
