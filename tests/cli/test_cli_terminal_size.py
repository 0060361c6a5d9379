"""``COLUMNS`` and ``LINES`` are read in ASCII digits only: a value in other digits
(``"²"``, which the console library took for a number and then could not read)
stopped every command with a traceback before it said anything; it is now left
out, as ``"abc"`` is. Real processes: the consoles are made when the command line
is imported."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import rt_app

from ductline import terminal

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])  # the console's reading, not the database's
FULL_HEADER = "┃ run "  # the full table (piped, no readable COLUMNS: 200 columns)


def ductline(*words: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ductline", *words], capture_output=True, text=True, timeout=120,
                          env={**{k: v for k, v in os.environ.items() if k not in terminal.SIZES}, **env})


@pytest.mark.parametrize("value", ["²", "١٢٠", "0", "-3", "1_0"])
@pytest.mark.parametrize("name", ["COLUMNS", "LINES"])
def test_a_size_in_other_digits_is_left_out_not_a_traceback(db_url, store, name, value):
    rt_app.chain.trigger(1, database=store)
    done = ductline("runs", "--database", db_url, **{name: value})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert FULL_HEADER in done.stdout, done.stdout
    missing = ductline("show", "nope", "--database", db_url, **{name: value})
    assert missing.returncode == 2 and missing.stderr.startswith("error: RunNotFound"), missing.stderr


def test_a_size_in_ascii_digits_still_sizes_the_table(db_url, store):
    rt_app.chain.trigger(1, database=store)
    assert FULL_HEADER not in ductline("runs", "--database", db_url, COLUMNS="80").stdout
    assert FULL_HEADER in ductline("runs", "--database", db_url, COLUMNS="250").stdout


def test_size_reads_ascii_whole_positive_numbers_only(backend):
    env = {"COLUMNS": " 120 ", "LINES": "²"}
    assert terminal.size("COLUMNS", env) == 120 and terminal.size("LINES", env) is None
    assert [terminal.size("COLUMNS", {"COLUMNS": v}) for v in ("١٢٠", "0", "-1", "1e3", "")] == [None] * 5
    assert terminal.size("COLUMNS", {}) is None
