"""The command line's own mistakes and an app's: an app that fails to import says
where (its traceback's last frames; the whole traceback at DEBUG, and how to get
it), a missing dependency is not taken for a missing app, and the global options
``--log-level`` and ``--log-format`` take a listed choice and say where they go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

LEVELS = "'debug', 'info', 'warning', 'error', 'critical'"


def ductline(cwd: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ductline", *words], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={**os.environ, "COLUMNS": "400"})


@pytest.fixture
def broken_app(tmp_path: Path) -> Path:
    """``boom.py`` imports ``boom_helper``, which divides by zero at import."""
    (tmp_path / "boom_helper.py").write_text("def divide():\n    return 1 / 0\n\n\ndivide()\n", encoding="utf-8")
    (tmp_path / "boom.py").write_text("import boom_helper\n", encoding="utf-8")
    return tmp_path


def test_an_app_raising_at_import_names_where_and_how_to_see_the_traceback(broken_app: Path) -> None:
    done = ductline(broken_app, "trigger", "boom.py:pipe")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: TargetError: 'boom.py:pipe': importing 'boom' raised ZeroDivisionError: division by zero "
        "(at boom_helper.py:2 in divide, called from boom_helper.py:5, called from boom.py:1); "
        "`ductline --log-level DEBUG ...` logs the whole traceback")


def test_at_debug_the_whole_traceback_is_logged(broken_app: Path) -> None:
    done = ductline(broken_app, "--log-level", "debug", "trigger", "boom.py:pipe")
    assert done.returncode == 2
    assert "DEBUG ductline.cli: Importing an app failed" in done.stderr
    assert "Traceback (most recent call last):" in done.stderr
    assert 'boom_helper.py", line 2, in divide' in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: TargetError: ") and "logs the whole traceback" not in last


def test_a_missing_dependency_is_not_a_missing_app(tmp_path: Path) -> None:
    (tmp_path / "needs_more.py").write_text("import no_such_dependency_here\n", encoding="utf-8")
    done = ductline(tmp_path, "trigger", "needs_more:pipe")
    assert done.returncode == 2
    assert ("importing 'needs_more' raised ModuleNotFoundError: No module named 'no_such_dependency_here' "
            "(at needs_more.py:1)") in done.stderr
    assert "give a file path" not in done.stderr


EAGER = """\
import ductline

def double(x):
    return 2 * x

pipe = ductline.Pipeline("eager").start(double)
pipe.trigger(5)  # at the top level: every process that imports the app would start a run
"""


@pytest.mark.parametrize("words", [("worker", "--app", "eager.py"), ("run", "eager.py:pipe", "--args", "[1]"),
                                   ("trigger", "eager.py:pipe", "--args", "[1]")],
                         ids=["worker", "run", "trigger"])
def test_an_app_that_triggers_at_import_is_refused_before_any_run_is_written(
        tmp_path: Path, words: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker imports its apps in its own process too (and so do the commands given
    one): a trigger at an app's top level used to start a run at every worker start,
    and the worker then started children forever, each refused the same trigger."""
    (tmp_path / "eager.py").write_text(EAGER, encoding="utf-8")
    database = f"sqlite:///{tmp_path}/eager.db"
    monkeypatch.setenv("DUCTLINE_DATABASE_URL", database)  # where the app's own trigger would write
    done = ductline(tmp_path, *words)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: TargetError: 'eager.py")
    assert "raised RuntimeError: eager.trigger() was called while ductline imported eager.py" in last
    assert 'put the call under `if __name__ == "__main__":` (at eager.py:7)' in last
    if (tmp_path / "eager.db").exists():  # the worker made its database before importing the app
        listed = ductline(tmp_path, "runs", "--json", "--database", database)
        assert listed.returncode == 0 and '"eager"' not in listed.stdout, listed.stdout
    assert not (tmp_path / "ductline.db").exists()


def test_an_unknown_log_level_lists_the_levels(tmp_path: Path) -> None:
    done = ductline(tmp_path, "--log-level", "verbose", "runs")
    assert done.returncode == 2
    assert f"'verbose' is not one of {LEVELS}" in done.stderr
    assert "ValueError" not in done.stderr


@pytest.mark.parametrize("option,value", [("--log-level", "DEBUG"), ("--log-format", "json")])
def test_a_global_option_after_the_command_says_where_it_goes(tmp_path: Path, option: str, value: str) -> None:
    done = ductline(tmp_path, "runs", option, value)
    assert done.returncode == 2
    assert (f"No such option '{option}'. {option} is a global option: give it before the command, "
            f"as in `ductline {option} ... runs`.") in done.stderr
    assert not (tmp_path / "ductline.db").exists()


@pytest.mark.parametrize("words,said", [
    (("--database", "sqlite:///x.db", "runs"), "--database is an option of the command: give it after the command, "
                                              "as in `ductline runs --database ...`, or set DUCTLINE_DATABASE_URL "
                                              "for every command."),
    (("--concurrency", "2", "worker"), "--concurrency is an option of the command: give it after the command, "
                                       "as in `ductline worker --concurrency ...`."),
])
def test_a_command_option_before_the_command_says_where_it_goes(tmp_path: Path, words: tuple[str, ...],
                                                                  said: str) -> None:
    done = ductline(tmp_path, *words)
    assert done.returncode == 2
    assert f"No such option '{words[0]}'. {said}" in " ".join(done.stderr.split()), done.stderr
    assert not (tmp_path / "x.db").exists()


def test_an_option_no_command_takes_gets_no_hint(tmp_path: Path) -> None:
    done = ductline(tmp_path, "--no-such-thing", "runs")
    assert done.returncode == 2 and done.stderr.strip().endswith("Error: No such option '--no-such-thing'.")


def test_a_three_slash_sqlite_url_that_reads_as_an_absolute_path_says_four_slashes_are_needed(tmp_path: Path) -> None:
    # Run in tmp_path: the URL names the relative folder tmp/..., which is not there; /tmp is.
    folder = tmp_path.relative_to("/")
    done = ductline(tmp_path, "runs", "--database", f"sqlite:///{folder}/runs.db")
    assert done.returncode != 0
    assert (f"(sqlite:///{folder}/runs.db names {folder}/runs.db under the working directory; an absolute path "
            f"needs four slashes: sqlite:////{folder}/runs.db)") in " ".join(done.stderr.split()), done.stderr
    relative = ductline(tmp_path, "runs", "--database", "sqlite:///no_such_folder/runs.db")
    assert "does not exist" in relative.stderr and "four slashes" not in relative.stderr


def test_global_options_are_documented_in_the_help(tmp_path: Path) -> None:
    done = ductline(tmp_path, "--help")
    assert "--log-level [debug|info|warning|error|critical]" in done.stdout
    assert "before the command" in " ".join(done.stdout.split())


def test_every_option_of_the_reference_commands_is_described_and_app_is_named_alike() -> None:
    """--help of each command: every option has a description (a bare ``--json``
    said nothing), ``--app`` reads MODULE_OR_FILE everywhere, defaults are stated."""
    from click.testing import CliRunner

    from ductline.cli import cli

    runner = CliRunner()
    commands = [["runs"], ["show"], ["definitions"], ["runs", "move"], ["dashboard"], ["worker"],
                ["mark-succeeded"], ["run"], ["trigger"]]
    for words in commands:
        text = runner.invoke(cli, [*words, "--help"], terminal_width=200).output
        lines = text.splitlines() + [""]
        # An option without text on its line nor a further line of text under it says nothing.
        bare = [line for i, line in enumerate(lines[:-1]) if line.startswith("  -") and "--help" not in line
                and len(line.strip().split("  ")) < 2 and not lines[i + 1].startswith("      ")]
        assert not bare, (words, bare)
        if "--app" in text:
            assert "--app MODULE_OR_FILE" in text, (words, text)
    worker = runner.invoke(cli, ["worker", "--help"], terminal_width=200).output
    assert "(default: CPUs)" in worker
    top = " ".join(runner.invoke(cli, ["--help"], terminal_width=200).output.split())
    assert "ends completed, halted" not in top and "it has not ended" in top
