"""What the children of an in-process run import, and how a task names its step.

Children import the modules that define the steps they run (computed from each
step's ``module:qualname``, with the module's folder put on their ``sys.path``) and
`ductline.local.childboot`, which lets them find a step by ``module:qualname``
without the pipeline being registered in the child.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ductline.dsl.graph import Definition, Node
from ductline.errors import DefinitionError

# A Task's ``pipeline`` field is PREFIX + a JSON object naming the step to run
# ("ref": "module:qualname", and "scaled" for a scaled timeout); the module
# ductline.local.childboot resolves it in the child.
PREFIX = "ductline.local:"
BOOT_APP = "ductline.local.childboot"
READY_REF = "ductline.local.childboot:ready"


def needs_child(node: Node, inline: bool = False) -> bool:
    """The step runs in a child process: a sync step with process (or fresh)
    isolation, unless the run calls its steps inline (`ductline.testing`)."""
    return not inline and node.kind != "async" and node.options.isolation in ("process", "fresh")


def _module_root(module: ModuleType) -> str | None:
    """The sys.path folder from which ``module`` is importable by its name."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    if path.name == "__init__.py":
        path = path.parent
    depth = len(module.__name__.split("."))
    return str(path.parents[depth - 1])


@dataclass(frozen=True, slots=True)
class ChildSetup:
    """What children need to run a definition's steps.

    Attributes:
        refs: ``module:qualname`` of every step that runs in a child, by step name.
        apps: the modules (or files) a child imports at start.
        sys_path: folders a child puts first on ``sys.path``.
        main_alias: the name under which a child imports the parent's ``__main__``.
    """

    refs: dict[str, str]
    apps: list[str]
    sys_path: list[str]
    main_alias: str | None


def _main_alias() -> tuple[str | None, str | None]:
    """``(module name, app spec)`` under which a child imports the parent's ``__main__``."""
    main = sys.modules.get("__main__")
    spec_name = getattr(getattr(main, "__spec__", None), "name", None)
    if spec_name and spec_name != "__main__":
        return spec_name, spec_name
    file = getattr(main, "__file__", None)
    if file and os.path.isfile(file):  # not "<stdin>" (python -) nor "<string>" (python -c)
        return Path(file).stem, os.path.abspath(file)
    return None, None


def child_setup(definition: Definition, *, inline: bool = False) -> ChildSetup:
    """Compute what the children of a run import, from each step's ``ref``.

    A step defined in ``__main__`` is imported again from its file under the
    file's stem (the child's own ``__main__`` is not the user's script).

    Raises:
        DefinitionError: a step that runs in a child lives in a module that a child
            cannot import (``__main__`` without a file, e.g. an interactive session).
    """
    nodes = list(definition.nodes.values())
    if definition.on_halt is not None:
        nodes.append(definition.on_halt)
    alias, main_app = _main_alias()
    refs: dict[str, str] = {}
    apps: list[str] = []
    folders: list[str] = []
    for node in nodes:
        if not needs_child(node, inline):
            continue
        module_name, _, qualname = node.ref.partition(":")
        module = sys.modules.get(module_name)
        app = module_name
        if module_name == "__main__":
            if alias is None or main_app is None:
                raise DefinitionError(
                    f"step {node.name!r} is defined in __main__ without a file, so a child process "
                    "cannot import it; define it in a module, make it async, or use isolation='thread'")
            module_name, app = alias, main_app
        refs[node.name] = f"{module_name}:{qualname}"
        if app not in apps:
            apps.append(app)
        root = _module_root(module) if module is not None and app == module_name else None
        if root is not None and root not in folders:
            folders.append(root)
    apps.append(BOOT_APP)
    return ChildSetup(refs, apps, folders, alias)


def parent_type_name(error_type: str | None, main_alias: str | None) -> str | None:
    """The name the parent knows a child's exception type by.

    A class defined in the parent's ``__main__`` (a script run with ``python
    script.py``) is ``__main__.Name`` in the parent, where ``retry_on`` and
    ``no_retry_on`` name it, but ``<alias>.Name`` in the child, which imported the
    script again under `ChildSetup.main_alias`: the alias is mapped back.
    """
    if error_type is None or main_alias is None or not error_type.startswith(main_alias + "."):
        return error_type
    return "__main__." + error_type[len(main_alias) + 1:]


def task_pipeline(ref: str, timeout: Any, main_module: str | None = None) -> str:
    """The ``pipeline`` field of a Task for a step ``ref`` with option ``timeout``."""
    payload: dict[str, Any] = {"ref": ref}
    if hasattr(timeout, "seconds_for"):  # a ScaledTimeout: the child sizes the input
        size = timeout.size_ref
        if size.startswith("__main__:") and main_module:
            size = f"{main_module}:{size.partition(':')[2]}"
        payload["scaled"] = {"floor": timeout.floor, "cap": timeout.cap, "size": size,
                             "seconds_per_unit": timeout.seconds_per_unit, "unit": timeout.unit}
    return PREFIX + json.dumps(payload)
