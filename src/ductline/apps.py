"""Loading user code: ``module``, ``module:attr``, ``path/to/file.py`` or
``path/to/file.py:attr``.

A file is imported as a module named after its stem with its folder put first on
``sys.path``, so that worker children can import it again by the same name.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from ductline.dsl.pipeline import PipelineBuilder as Pipeline
from ductline.errors import TargetError
from ductline.execution import importing
from ductline.frames import path as _path
from ductline.frames import where as where  # the one rule of the frames an error names


def split(target: str) -> tuple[str, str | None]:
    if not isinstance(target, str) or not target.strip():
        raise TargetError(f"target must be 'module:attr' or 'path/to/file.py:attr', got {target!r}")
    module, sep, attr = target.rpartition(":")
    if not sep or "/" in attr or attr.endswith(".py"):
        return target, None
    if not attr.isidentifier():
        raise TargetError(f"{target!r}: {attr!r} is not a Python name")
    return module, attr


def import_app(spec: str) -> tuple[ModuleType, str | None]:
    """Import the module part of a target; returns ``(module, folder_added_to_path)``.
    A run started at the module's top level meanwhile is refused
    (`ductline.execution.importing`): every process that serves the app imports it.

    Raises:
        TargetError: the file or module does not exist or fails to import.
    """
    module_part, _ = split(spec)
    folder = None
    name = module_part
    if module_part.endswith(".py") or os.sep in module_part:
        path = os.path.abspath(module_part)
        if not os.path.isfile(path):
            raise TargetError(f"{spec!r}: no such file {path}")
        folder = os.path.dirname(path)
        name = os.path.splitext(os.path.basename(path))[0]
        if folder not in sys.path:
            sys.path.insert(0, folder)
        loaded = sys.modules.get(name)
        loaded_file = getattr(loaded, "__file__", None)
        if loaded is not None and (loaded_file is None or os.path.abspath(loaded_file) != path):
            raise TargetError(f"{spec!r}: a different module named {name!r} is already imported "
                              f"({loaded_file or 'built in'}); rename the file")
    elif os.getcwd() not in sys.path:
        # Like `python -m`: a module in the working directory is importable by name.
        sys.path.insert(0, os.getcwd())
        folder = os.getcwd()
    try:
        with importing.importing(spec):  # a run started at the app's top level is refused meanwhile
            return importlib.import_module(name), folder
    except ModuleNotFoundError as exc:
        if not _names_the_app(exc, name):  # a module the app imports is missing, not the app
            raise TargetError(f"{spec!r}: importing {name!r} raised {type(exc).__name__}: {exc}"
                              f"{where(exc)}") from exc
        raise TargetError(f"{spec!r}: cannot import {name!r}: {exc}{_hint(module_part, name)}") from exc
    except Exception as exc:  # the user's module raised while importing
        raise TargetError(f"{spec!r}: importing {name!r} raised {type(exc).__name__}: {exc}{where(exc)}"
                          f"{_in_package(spec, exc)}") from exc


def _hint(module_part: str, name: str) -> str:
    """What to try when the module a target names is not found: its file, if that
    exists from here; else where to run from."""
    if module_part.endswith(".py"):
        return ""
    path = name.replace(".", os.sep) + ".py"
    if os.path.isfile(path):
        return f" (or give a file path, e.g. {path})"
    return (f" (no file {path} here either: run from the folder that holds {name.split('.')[0]!r}, or add "
            "that folder to PYTHONPATH)")


def _in_package(spec: str, exc: Exception) -> str:
    """For a file given by path whose relative import failed: the target that imports
    it inside its package (a file is imported by its stem, from its own folder)."""
    if not (isinstance(exc, ImportError) and "no known parent package" in str(exc)):
        return ""
    module_part, attr = split(spec)
    folder, filename = os.path.split(os.path.abspath(module_part))
    parts = [os.path.splitext(filename)[0]]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, package = os.path.split(folder)
        parts.insert(0, package)
    if len(parts) == 1:
        return ""
    target = ".".join(parts) + (f":{attr}" if attr else "")
    place = "here" if os.path.abspath(folder) == os.getcwd() else f"from {_path(folder)}"
    return (f"; the file is in the package {parts[0]!r}: give the target as {target} and run {place} "
            "(or with that folder on PYTHONPATH)")


def _names_the_app(exc: ModuleNotFoundError, name: str) -> bool:
    """Whether the module not found is the app's module itself (or a package it sits
    in), rather than a module the app's code imports."""
    return exc.name is not None and (name == exc.name or name.startswith(exc.name + "."))


def load_pipeline(target: str) -> tuple[Pipeline, str | None]:
    """Load the `Pipeline` a target names; returns ``(pipeline, folder_added_to_path)``.

    Raises:
        TargetError: no attribute of that name, or it is not a Pipeline.
    """
    module, folder = import_app(target)
    _, attr = split(target)
    if attr is None:
        found = [v for v in vars(module).values() if isinstance(v, Pipeline)]
        if len(found) != 1:
            raise TargetError(f"{target!r}: name the pipeline as {target}:ATTR "
                              f"({len(found)} pipelines found in the module)")
        return found[0], folder
    if not hasattr(module, attr):
        raise TargetError(f"{target!r}: module {module.__name__!r} has no attribute {attr!r}")
    value = getattr(module, attr)
    if not isinstance(value, Pipeline):
        kind = type(value).__name__
        article = "an" if kind[0].lower() in "aeiou" else "a"
        raise TargetError(f"{target!r}: {attr!r} is {article} {kind}, not a ductline Pipeline")
    return value, folder
