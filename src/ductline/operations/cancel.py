"""Cancelling a run: the operator's (or the API's) stop, applied by the engine
(`ductline.engine.stop.cancel`) in one transaction."""

from __future__ import annotations

from ductline.dsl.graph import Definition
from ductline.dsl.pipeline import registered_definition
from ductline.engine import childruns
from ductline.engine.stop import cancel
from ductline.observability.events import EventName, emit
from ductline.store import Store


def cancel_run(store: Store, run_id: str, definition: Definition | None = None) -> None:
    """Cancel a run in one transaction: its running attempts are ended (their
    workers kill the children when told by NOTIFY or at their next heartbeat),
    the rest skipped with reason ``cancelled``.

    Args:
        definition: the run's pipeline, to record its never-created dependents
            skipped; default: the pipeline of that name if this process defined it.

    Raises:
        RunNotFound, InvalidStateError: see `cancel`.
    """
    with store.transaction() as tx:
        pipeline = tx.run_pipeline(run_id)
        if definition is None and pipeline is not None:
            definition = registered_definition(pipeline)
        cancel(tx, definition, run_id)
    emit(EventName.PIPELINE_CANCELLED, pipeline=pipeline, run_id=run_id)
    childruns.committed(tx)
    # Its child runs, each in a transaction of its own (a worker's maintenance does
    # it too, should this process stop before it is done).
    childruns.cancel_orphans(store)
