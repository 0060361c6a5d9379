"""An operator's actions on one run: ``ductline retry`` (revive a halted run),
``cancel``, ``resume`` (a paused run) and ``send`` (an event), each through the
operations layer the API and the dashboard use too."""

from __future__ import annotations

from typing import Any

import click

from ductline import safetext, views
from ductline.command_support import command_store, database_option, fail, json_option, out
from ductline.errors import InvalidStateError


@click.command()
@click.argument("run_id")
@click.option("--force", "force", multiple=True, metavar="STEP",
              help="Re-run this step although it crossed an irreversible boundary (repeat for several).")
@database_option
def retry(run_id: str, force: tuple[str, ...], database: str | None) -> None:
    """Revive a halted run from its failed step(s) with fresh budgets.

    RUN_ID is a run id or a unique prefix of one (6 or more characters). A failed
    run (its deadline passed) is over and cannot be retried.
    """
    from ductline.operations.revive import retry_run

    store = command_store(database)
    run_id = views.resolve_run_id(store, run_id)
    try:
        retry_run(store, run_id, force=force)
    except InvalidStateError as exc:
        fail(f"{type(exc).__name__}: " + str(exc).replace("retry with force naming them",
                                                            "retry with --force STEP for each"))
    out.print(f"run {run_id} revived")


@click.command()
@click.argument("run_id")
@database_option
def cancel(run_id: str, database: str | None) -> None:
    """Cancel a run: kill its running attempts, skip the rest.

    RUN_ID is a run id or a unique prefix of one (6 or more characters).
    """
    from ductline.operations.cancel import cancel_run

    store = command_store(database)
    run_id = views.resolve_run_id(store, run_id)
    cancel_run(store, run_id)
    out.print(f"run {run_id} cancelled")


@click.command()
@click.argument("run_id")
@click.option("--input", "input_json", metavar="JSON",
              help="A new input for the paused step: one JSON value, passed as its single argument.")
@database_option
def resume(run_id: str, input_json: str | None, database: str | None) -> None:
    """Resume a paused run: its paused step runs now (optionally with a new input).

    RUN_ID is a run id or a unique prefix of one (6 or more characters).
    """
    from ductline.model.inputs import NO_INPUT
    from ductline.operations.resume import resume as resume_run

    value: Any = NO_INPUT
    if input_json is not None:
        value = json_option(input_json, "--input")
    store = command_store(database)
    run_id = views.resolve_run_id(store, run_id)
    resumed = resume_run(store, run_id, value)
    steps = ", ".join(sorted({r["step"] for r in resumed}))
    out.print(f"run {run_id} resumed" + (f": {steps}" if steps else "")
              + (" with a new input" if input_json is not None else ""), highlight=False, soft_wrap=True)


@click.command()
@click.argument("run_id")
@click.argument("event")
@click.option("--data", "data_json", metavar="JSON",
              help="The event's data: one JSON value, the waiting step's single argument (default null).")
@click.option("--key", metavar="KEY",
              help="An idempotency key: a second send with the same key to the run changes nothing.")
@database_option
def send(run_id: str, event: str, data_json: str | None, key: str | None, database: str | None) -> None:
    """Send the event EVENT to a run (a step waiting for it runs with its data).

    RUN_ID is a run id or a unique prefix of one (6 or more characters). An event
    the run does not wait for yet is kept until it does.
    """
    from ductline.operations.send import send as send_event

    value: Any = None
    if data_json is not None:
        value = json_option(data_json, "--data")
    store = command_store(database)
    run_id = views.resolve_run_id(store, run_id)
    sent = send_event(store, run_id, event, value, key)
    name = safetext.printable(event)
    if sent.duplicate:
        out.print(f"run {run_id}: event {name!r} with key {safetext.printable(str(key))!r} was sent already; "
                  "nothing changed", highlight=False, soft_wrap=True, markup=False)
    elif sent.step is not None:
        out.print(f"run {run_id}: event {name!r} sent; step {sent.step} runs now", highlight=False,
                  soft_wrap=True, markup=False)
    else:
        out.print(f"run {run_id}: event {name!r} kept until the run waits for it", highlight=False,
                  soft_wrap=True, markup=False)
