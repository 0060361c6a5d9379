"""`RunOperations`: the operations on runs bound to one store, for callers that
hold a store and act on runs by id (the dashboard, the CLI)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ductline.dsl.graph import Definition
from ductline.operations import cancel, mark, revive
from ductline.model.inputs import NO_INPUT
from ductline.operations.move import MoveResult, move_runs
from ductline.operations.resume import resume
from ductline.operations.send import Sent, send
from ductline.operations.trigger import Triggered, trigger_run
from ductline.store import Store


@dataclass(frozen=True, slots=True)
class RunOperations:
    """Trigger, retry, cancel, resume and move runs in ``store``, send them events and
    mark their step runs succeeded; each raises what the operation it calls documents
    (`ductline.operations.trigger.trigger_run`, `ductline.operations.revive.retry_run`,
    `ductline.operations.cancel.cancel_run`, `ductline.operations.resume.resume`,
    `ductline.operations.send.send`, `ductline.operations.mark.mark_succeeded`,
    `ductline.operations.move.move_runs`)."""

    store: Store

    def trigger(self, definition: Definition, args: tuple[Any, ...], **options: Any) -> Triggered:
        return trigger_run(definition, args, database=self.store, **options)[1]

    def retry(self, run_id: str, *, force: Iterable[str] = ()) -> None:
        revive.retry_run(self.store, run_id, force=force)

    def cancel(self, run_id: str) -> None:
        cancel.cancel_run(self.store, run_id)

    def resume(self, run_id: str, input: Any = NO_INPUT) -> list[dict[str, Any]]:
        return resume(self.store, run_id, input)

    def send(self, run_id: str, event: str, data: Any = None, key: str | None = None) -> Sent:
        return send(self.store, run_id, event, data, key)

    def mark_succeeded(self, definition: Definition, run_id: str, step: str, output: Any, **options: Any) -> Any:
        return mark.mark_succeeded(self.store, definition, run_id, step, output, **options)

    def move(self, from_definition: str, to_definition: str, mapping: dict[str, str],
             run_id: str | None = None) -> MoveResult:
        return move_runs(self.store, from_definition, to_definition, mapping, run_id=run_id)
