"""``ductline --version`` and ``ductline.__version__`` give the installed package's
version (read from its metadata only when asked for)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import ductline


def test_the_command_and_the_package_give_the_installed_version():
    installed = version("ductline")
    done = subprocess.run([sys.executable, "-m", "ductline", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ductline {installed}"
    assert ductline.__version__ == installed


def test_importing_ductline_does_not_read_the_metadata_or_croniter():
    code = ("import sys, ductline; "
            "print(sorted(m for m in ('importlib.metadata', 'croniter', 'ductline.version') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
