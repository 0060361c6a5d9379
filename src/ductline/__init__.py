"""ductline: a durable pipeline engine.

Declare a pipeline of steps in a few lines of Python; run it on worker processes
with all state in SQLite (embedded default) or PostgreSQL. Steps run in killable
child processes, so a step past its time limit is killed even when it is stuck in
C code or a syscall.

As a library, ductline configures no logging: its records (loggers under
``ductline``, each about a job with ``run_id``, ``job_id``, ``step`` and ``attempt``
as attributes) go to the handlers the application configures, and nowhere when it
configures none (docs/howto/logs.md, "In `ductline.execute`"). The CLI and workers
configure their own (`ductline.logs`).
"""

import logging as _logging

# Without it, Python's last-resort handler printed ductline's warnings bare on
# stderr (the message only, without the run or the step it was about) in any
# program that had not configured logging, e.g. around `ductline.execute`.
_logging.getLogger("ductline").addHandler(_logging.NullHandler())

from ductline.step_context import StepContext, context, cross_boundary
from ductline.childruns import ChildRunFailed, child, children
from ductline.dsl.backoff import Backoff
from ductline.pipeline import Pipeline
from ductline.dsl.schedule import Schedule, schedule
from ductline.dsl.steps import Step
from ductline.dsl.timeouts import ScaledTimeout
from ductline.errors import (
    ConfigurationError,
    DatabaseReplaced,
    DefinitionError,
    DuctlineError,
    ExecutionError,
    ExpandNotAList,
    InvalidStateError,
    PayloadNotSerializable,
    PayloadTooLarge,
    PipelineNotFound,
    Retry,
    RunFailed,
    RunNotFound,
    SchemaError,
    StepSignatureError,
    StoreError,
    StoreUnavailable,
    TargetError,
    TooManyKeptEvents,
)
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ductline.version import __version__
    from ductline.handle import RunHandle
    from ductline.local import StepResult, WorkflowResult, execute, execute_async

# Loaded on first use, each from its module: the in-process executor (with asyncio
# and rich), the client handle (with the store and the operations) and the version
# (read from the package metadata). A worker's children import only what declares
# pipelines, and start faster for it.
_LAZY = {"StepResult": "ductline.local", "WorkflowResult": "ductline.local", "execute": "ductline.local",
         "execute_async": "ductline.local", "local": "ductline.local", "RunHandle": "ductline.handle",
         "__version__": "ductline.version"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module = importlib.import_module(_LAZY[name])
        value = module if name == "local" else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ductline' has no attribute {name!r}")


__all__ = [
    "__version__",
    "Backoff",
    "ChildRunFailed",
    "ConfigurationError",
    "DatabaseReplaced",
    "DefinitionError",
    "DuctlineError",
    "ExecutionError",
    "ExpandNotAList",
    "InvalidStateError",
    "PayloadNotSerializable",
    "PayloadTooLarge",
    "Pipeline",
    "PipelineNotFound",
    "Retry",
    "RunHandle",
    "RunFailed",
    "RunNotFound",
    "ScaledTimeout",
    "Schedule",
    "SchemaError",
    "Step",
    "StepContext",
    "StepResult",
    "StepSignatureError",
    "StoreError",
    "StoreUnavailable",
    "TargetError",
    "TooManyKeptEvents",
    "WorkflowResult",
    "child",
    "children",
    "context",
    "cross_boundary",
    "execute",
    "execute_async",
    "schedule",
]

