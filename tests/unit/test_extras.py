"""A feature whose optional dependency is missing says which extra installs it."""

from __future__ import annotations

import sys

import pytest

from ductline.errors import ConfigurationError
from ductline.extras import EXTRAS, require


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
    assert str(raised.value) == f"{feature} support is not installed: pip install 'ductline[{extra}]'"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
