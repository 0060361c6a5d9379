"""The dashboard: a Starlette app over a read-only query layer of the store.

`create_app` builds it; ``ductline dashboard`` serves it (127.0.0.1 by default).
"""

from __future__ import annotations

from ductline.web.app import create_app

__all__ = ["create_app"]
