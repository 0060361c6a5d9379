"""Optional dependencies, installed with extras: a clear error naming the extra
when a feature needs one that is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from ductline.errors import ConfigurationError

# feature -> (module to import, extra that installs it)
EXTRAS = {
    "postgres": ("psycopg_pool", "postgres"),
    "dashboard": ("starlette", "dashboard"),
    "prometheus": ("prometheus_client", "prometheus"),
    "otel": ("opentelemetry.sdk", "otel"),
}


def require(feature: str) -> ModuleType:
    """Import what ``feature`` needs.

    Raises:
        ConfigurationError: it is not installed; the message names the extra.
    """
    module, extra = EXTRAS[feature]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigurationError(f"{feature} support is not installed: pip install 'ductline[{extra}]'") from None
