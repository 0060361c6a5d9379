"""A feature whose optional dependency is missing says which extra installs it, and
the command that does: from the checkout ductline runs from (it is not installed
from a package index, where the name may be someone else's)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import ductline
from ductline.errors import ConfigurationError
from ductline.extras import EXTRAS, install_command, require

CHECKOUT = Path(ductline.__file__).resolve().parent.parent.parent  # <checkout>/src/ductline/__init__.py


@pytest.mark.parametrize("feature", sorted(EXTRAS))
def test_an_installed_extra_gives_its_module(feature: str) -> None:
    module, _ = EXTRAS[feature]
    assert require(feature).__name__ == module


@pytest.mark.parametrize("feature", sorted(EXTRAS))
def test_a_missing_extra_names_the_pip_install_that_adds_it(feature: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module, extra = EXTRAS[feature]
    monkeypatch.setitem(sys.modules, module, None)  # importing it now raises ImportError, as if not installed
    with pytest.raises(ConfigurationError) as raised:
        require(feature)
    # The tests run ductline from its checkout (src on the path, or an editable install).
    assert str(raised.value) == f"{feature} support is not installed: pip install -e '{CHECKOUT}[{extra}]'"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def _checkout(root: Path, name: str = "ductline") -> Path:
    package = root / "src" / "ductline"
    package.mkdir(parents=True)
    (root / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n')
    return package


def test_the_command_names_the_checkout_ductline_runs_from(tmp_path: Path) -> None:
    package = _checkout(tmp_path / "my checkout")
    assert install_command("postgres", package) == f"pip install -e '{tmp_path}/my checkout[postgres]'"


@pytest.mark.parametrize("layout", ["wheel", "other project", "not src", "broken pyproject"])
def test_without_a_checkout_of_ductline_the_command_has_a_placeholder_for_one(tmp_path: Path, layout: str) -> None:
    if layout == "wheel":  # site-packages/ductline: no pyproject.toml two levels up
        package = tmp_path / "lib" / "site-packages" / "ductline"
        package.mkdir(parents=True)
    elif layout == "other project":
        package = _checkout(tmp_path, name="someone-elses")
    elif layout == "not src":
        package = tmp_path / "lib" / "ductline"
        package.mkdir(parents=True)
        (tmp_path / "pyproject.toml").write_text('[project]\nname = "ductline"\n')
    else:
        package = _checkout(tmp_path)
        (tmp_path / "pyproject.toml").write_text("[project\n")
    assert install_command("otel", package) == "pip install -e 'path/to/ductline[otel]'"
