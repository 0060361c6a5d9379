"""Optional dependencies, installed with extras: a clear error naming the extra
when a feature needs one that is missing, and the command that installs it."""

from __future__ import annotations

import importlib
import shlex
import tomllib
from pathlib import Path
from types import ModuleType

from ductline.errors import ConfigurationError

# feature -> (module to import, extra that installs it)
EXTRAS = {
    "postgres": ("psycopg_pool", "postgres"),
    "dashboard": ("starlette", "dashboard"),
    "prometheus": ("prometheus_client", "prometheus"),
    "otel": ("opentelemetry.sdk", "otel"),
}

# The package's folder in a checkout: src/ductline; the checkout is two levels up.
PACKAGE_DIR = Path(__file__).resolve().parent


def require(feature: str) -> ModuleType:
    """Import what ``feature`` needs.

    Raises:
        ConfigurationError: it is not installed; the message names the extra and
            the command that installs it (`install_command`).
    """
    module, extra = EXTRAS[feature]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigurationError(f"{feature} support is not installed: {install_command(extra)}") from None


def install_command(extra: str, package_dir: Path = PACKAGE_DIR) -> str:
    """The pip command that adds ``extra`` (e.g. ``"postgres"``) to this environment.

    ductline is installed from a checkout, not from a package index (where the name
    may belong to something else): the command names the checkout this copy runs
    from (an editable install, or ``src`` on the path), else a placeholder for one,
    as the README's install does: ``pip install -e 'path/to/ductline[postgres]'``.

    Args:
        package_dir: the folder of the ``ductline`` package that runs.
    """
    where = _checkout(package_dir) or "path/to/ductline"
    return f"pip install -e {shlex.quote(f'{where}[{extra}]')}"


def _checkout(package_dir: Path) -> Path | None:
    """The checkout holding ``package_dir`` (``<checkout>/src/ductline``: its
    ``pyproject.toml`` names the project ductline), or ``None`` (a wheel's install)."""
    root = package_dir.parent.parent
    try:
        with open(root / "pyproject.toml", "rb") as fh:
            name = tomllib.load(fh).get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return root if package_dir.parent.name == "src" and name == "ductline" else None
