"""ductline: a durable pipeline engine.

Declare a pipeline of steps in a few lines of Python; run it on worker processes
with all state in SQLite (embedded default) or PostgreSQL. Steps run in killable
child processes, so a step past its time limit is killed even when it is stuck in
C code or a syscall.
"""

from ductline.step_context import StepContext, context, cross_boundary
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
    InvalidStateError,
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
)
from ductline.handle import RunHandle
from ductline.version import __version__
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ductline.local import StepResult, WorkflowResult, execute, execute_async

# The in-process executor (and what it imports: asyncio, rich) is loaded on first
# use: a worker's children, the worker and the CLI never need it, and each of them
# starts faster without it.
_LAZY = {"StepResult", "WorkflowResult", "execute", "execute_async"}


def __getattr__(name: str) -> Any:
    if name in _LAZY or name == "local":  # ``ductline.local.start`` after ``import ductline``
        import ductline.local

        value = ductline.local if name == "local" else getattr(ductline.local, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ductline' has no attribute {name!r}")

__all__ = [
    "__version__",
    "Backoff",
    "ConfigurationError",
    "DatabaseReplaced",
    "DefinitionError",
    "DuctlineError",
    "ExecutionError",
    "InvalidStateError",
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
    "WorkflowResult",
    "context",
    "cross_boundary",
    "execute",
    "execute_async",
    "schedule",
]

