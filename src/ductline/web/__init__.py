"""The dashboard: a Starlette app over a read-only query layer of the store
(installed with ``ductline[dashboard]``).

`create_app` builds it; ``ductline dashboard`` serves it (127.0.0.1 by default).
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def create_app(*args: Any, **kwargs: Any) -> Any:
    """See `ductline.web.app.create_app` (imported on first use, so the CLI works
    without the dashboard's dependencies)."""
    from ductline.extras import require

    require("dashboard")
    from ductline.web.app import create_app as create

    return create(*args, **kwargs)
