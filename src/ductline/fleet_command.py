"""``ductline runs move`` (moving in-flight runs to another definition) and
``ductline definitions`` (the definitions workers loaded, with the live workers and
ready jobs of each queue)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.table import Table

from ductline import tables
from ductline.schedule_command import _database, _open


@click.command()
@click.option("--from", "from_definition", required=True, metavar="FINGERPRINT",
              help="The definition the runs follow (its fingerprint or first digits; '-' for runs started "
                   "before versions were recorded).")
@click.option("--to", "to_definition", required=True, metavar="FINGERPRINT",
              help="The definition to move them to: one a worker has loaded (see `ductline definitions`).")
@click.option("--map", "mapping", multiple=True, metavar="OLD=NEW",
              help="A step renamed between the two (repeat for several); other steps keep their names.")
@click.option("--run", "run_id", default=None, help="Move only this run (its id).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
@_database
def move(from_definition: str, to_definition: str, mapping: tuple[str, ...], run_id: str | None, as_json: bool,
         database: str | None) -> None:
    """Move the unfinished runs of one definition of a pipeline to another.

    Refused, with nothing changed, when the mapping leaves a job that may still run
    without a step in the target definition. A run with an attempt running is left
    as it is (run the command again once the attempt ended). Each move is recorded
    in the run's metadata (`moves`).
    """
    from ductline.model.moves import MoveRefused
    from ductline.operations.move import move_runs, parse_mapping

    store = _open(database)
    try:
        result = move_runs(store, from_definition, to_definition, parse_mapping(mapping), run_id=run_id)
    except MoveRefused as exc:
        click.echo(f"error: move refused: {exc}", err=True)
        sys.exit(2)
    finally:
        store.close()
    if as_json:
        print(json.dumps({"pipeline": result.pipeline, "from": result.from_definition, "to": result.to_definition,
                          "moved": result.moved, "busy": result.busy}))
        return
    click.echo(f"moved {len(result.moved)} run(s) of {result.pipeline} from definition "
               f"{result.from_definition or '-'} to {result.to_definition}")
    if result.busy:
        click.echo(f"{len(result.busy)} run(s) had an attempt running and were not moved: run the command again "
                   "once their attempts ended")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object: the definitions and the queues.")
@_database
def definitions(as_json: bool, database: str | None) -> None:
    """List the definitions workers have loaded, which live workers serve each, and
    the queues: ready jobs and live workers per queue."""
    from ductline.model.serving import workers_per_queue
    from ductline.store import fleet

    store = _open(database, read_only=True)
    try:
        loaded = fleet.definitions(store)
        from ductline.config import load_settings

        offers = fleet.live_offers(store, load_settings(database_url=database).lease_seconds)
        ready = fleet.ready_per_queue(store)
    finally:
        store.close()
    workers = workers_per_queue(offers)
    rows: list[dict[str, Any]] = [{
        "fingerprint": d.fingerprint, "pipeline": d.pipeline, "steps": dict(d.step_queues),
        "live_workers": sum(1 for o in offers if d.fingerprint in o.definitions),
    } for d in loaded]
    queues: list[dict[str, Any]] = [{"queue": q, "ready": ready.get(q, 0), "live_workers": workers.get(q, 0)}
              for q in sorted(set(ready) | set(workers))]
    if as_json:
        print(json.dumps({"definitions": rows, "queues": queues}))
        return
    console = tables.output_console()
    table = Table("definition", "pipeline", "steps", "live workers")
    for r in rows:
        table.add_row(r["fingerprint"], r["pipeline"], ", ".join(r["steps"]), str(r["live_workers"]))
    console.print(table)
    by_queue = Table("queue", "ready jobs", "live workers")
    for q in queues:
        style = "red" if q["ready"] and not q["live_workers"] else ""
        by_queue.add_row(str(q["queue"]), str(q["ready"]), str(q["live_workers"]), style=style)
    console.print(by_queue)
