"""Typed steps: a user's fully typed pipeline module passes ``mypy --strict`` and
pyright, and a misspelled or mistyped step option is a type-checker error (and, at
run time, a TypeError naming the option and the valid ones)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ductline import Pipeline

HERE = Path(__file__).parent
BAD = '''
from ductline import Pipeline
def step(x: int) -> int:
    return x
misspelled = Pipeline("typing_bad_1").start(step, timout=30)
mistyped = Pipeline("typing_bad_2").start(step, isolation="fork")
loud = Pipeline("typing_bad_3").start(step, log_level="LOUD")
unprioritised = Pipeline("typing_bad_4", prioirty=1).start(step)
'''


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), capture_output=True, text=True, timeout=300, cwd=HERE)


@pytest.mark.parametrize("checker", [[sys.executable, "-m", "mypy", "--strict"],
                                     [sys.executable, "-m", "pyright"]], ids=["mypy", "pyright"])
def test_a_typed_pipeline_module_type_checks(checker):
    done = run(*checker, "typed_pipeline.py")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("checker", [[sys.executable, "-m", "mypy", "--strict"],
                                     [sys.executable, "-m", "pyright"]], ids=["mypy", "pyright"])
def test_a_misspelled_option_is_a_type_error(checker, tmp_path):
    bad = tmp_path / "bad_pipeline.py"
    bad.write_text(BAD)
    done = run(*checker, str(bad))
    assert done.returncode != 0
    assert "timout" in done.stdout and "fork" in done.stdout and "LOUD" in done.stdout, done.stdout
    assert "prioirty" in done.stdout, done.stdout


def test_a_misspelled_option_names_the_valid_ones_at_run_time():
    with pytest.raises(TypeError, match=r"chain\(\) got unknown option 'timout' \(did you mean 'timeout'\?\); "
                                        r"the step options are name, timeout, "):
        Pipeline("typing_runtime").start(len_of).chain(to=len_of, timout=30)


def len_of(x: str) -> int:
    return len(x)
