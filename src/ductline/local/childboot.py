"""Imported by every child of the in-process executor (it is the last of the
child's apps), never by the parent.

A worker's child finds a step through the pipeline registry
(``registered(task.pipeline).definition().node(task.step).func``), which needs the
module defining the pipeline. `ductline.execute` also runs pipelines built inside
functions or tests, so its tasks name the step's ``module:qualname`` instead, after
the prefix ``ductline.local:`` (with a scaled timeout's parameters, which the child
evaluates as a worker's child does); this module teaches the child's
``ductline.dsl.pipeline.registered`` to resolve such names. Other names are looked
up as before.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from ductline.dsl import pipeline as _pipeline
from ductline.local.childapps import PREFIX


def ready() -> None:
    """The probe a new child runs to show it imported its apps."""
    return None


def resolve(ref: str) -> Any:
    """The object named by ``module:qualname``."""
    module_name, _, qualname = ref.partition(":")
    found: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


@dataclass(frozen=True, slots=True)
class _Options:
    timeout: Any = None
    log_level: str | None = None  # the parent sends the step's level with the task


@dataclass(frozen=True, slots=True)
class _Step:
    func: Callable[..., Any]
    options: _Options = field(default_factory=_Options)


@dataclass(frozen=True, slots=True)
class _ByReference:
    """Quacks like a `Pipeline` and its `Definition` for the child's lookup."""

    payload: str

    def definition(self) -> "_ByReference":
        return self

    def node(self, step: str) -> _Step:
        spec = json.loads(self.payload)
        scaled = spec.get("scaled")
        if scaled is None:
            return _Step(resolve(spec["ref"]))
        from ductline.dsl.timeouts import ScaledTimeout

        timeout = ScaledTimeout(floor=scaled["floor"], cap=scaled["cap"], size=resolve(scaled["size"]),
                                seconds_per_unit=scaled["seconds_per_unit"], unit=scaled["unit"])
        return _Step(resolve(spec["ref"]), _Options(timeout))


def install() -> None:
    original = _pipeline.registered
    if getattr(original, "_ductline_local", False):
        return

    def registered(name: str) -> Any:
        if name.startswith(PREFIX):
            return _ByReference(name[len(PREFIX):])
        return original(name)

    registered._ductline_local = True  # type: ignore[attr-defined]
    _pipeline.registered = registered


install()
