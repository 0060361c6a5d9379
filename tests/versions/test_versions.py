"""Definition versions: a run records its definition's fingerprint; a worker claims
only jobs of the definitions it loaded; a job no live worker can run stays pending,
charged nothing, and says why; an operator moves runs to another definition."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from ductline import views
from ductline.dsl.fingerprint import fingerprint
from ductline.errors import DefinitionNotFound
from ductline.model.moves import MoveRefused
from ductline.operations.move import move_runs, parse_mapping
from ductline.store import fleet
from ductline.store.records import LoadedDefinition
from tests.versions.version_support import V1, V2, drive, v1


def register(store: Any, worker_id: str, *definitions: Any, queues: tuple[str, ...] = ("default",)) -> None:
    store.register_worker(worker_id, "test-host", 1, 1, queues=queues,
                          definitions=[LoadedDefinition.of(d) for d in definitions])


# -- fingerprints -------------------------------------------------------------------------


def a(x):  # other functions than version 1's, the same graph
    return x


def b(x):
    return x


def c(x):
    return x



def test_the_fingerprint_follows_the_graph_not_the_code() -> None:
    assert V1.fingerprint != V2.fingerprint  # b renamed b2
    assert len(V1.fingerprint) == 16 and int(V1.fingerprint, 16) >= 0
    assert fingerprint(V1) == V1.fingerprint  # stable
    from ductline import Pipeline

    same = Pipeline("versioned_copy").start(a).chain(to=b).chain(to=c).definition()
    other_name = Pipeline("versioned_copy2").start(a).chain(to=b).chain(to=c).definition()
    assert same.fingerprint != V1.fingerprint  # the pipeline's name is part of it
    assert same.fingerprint != other_name.fingerprint
    timed = Pipeline("versioned_copy3").start(a).chain(to=b, timeout=5).chain(to=c).definition()
    queued = Pipeline("versioned_copy3").start(a).chain(to=b, queue="gpu").chain(to=c).definition()
    plain = Pipeline("versioned_copy3").start(a).chain(to=b).chain(to=c).definition()
    assert timed.fingerprint == plain.fingerprint  # options that do not route are no version
    assert queued.fingerprint != plain.fingerprint  # a step sent elsewhere is


# -- claims by definition ----------------------------------------------------------------------


def test_a_worker_claims_only_the_definitions_it_loaded(store: Any) -> None:
    run = v1.versioned.trigger(1, database=store)
    assert store.get_run(run.id)["definition"] == V1.fingerprint
    assert drive(store, V2) == []  # the new code's worker leaves the old run alone
    assert store.next_wakeups(["versioned"], definitions=[V2.fingerprint])[0] is None
    assert drive(store, V1) == ["a", "b", "c"]
    assert store.get_run(run.id)["status"] == "completed"


def test_a_handle_that_times_out_says_why_its_run_waits(store: Any) -> None:
    # The same words as `ductline show`, in the TimeoutError of RunHandle.result / wait.
    run = v1.versioned.trigger(1, database=store)
    with pytest.raises(TimeoutError) as info:
        run.result(timeout=0.05)
    # ... and which database it looked in (a trigger from another directory makes a new SQLite file)
    looked = (f"the SQLite database {os.path.abspath(store.dialect.path)}" if store.dialect.name == "sqlite"
              else f"the database {store.url}")
    assert str(info.value) == (f"run {run.id} is still pending after 0.05 s; "
                               f"step a waits: no live worker serves queue 'default' (looked in {looked})")
    register(store, "w-new", V2)
    with pytest.raises(TimeoutError) as info:
        run.wait(timeout=0)
    assert str(info.value).endswith(f"; step a waits: no live worker has step 'a' of definition {V1.fingerprint[:8]} "
                                    f"(looked in {looked})")
    register(store, "w-old", V1)
    with pytest.raises(TimeoutError) as info:
        run.wait(timeout=0)
    assert str(info.value) == f"run {run.id} is still pending after 0 s"  # a worker can run it: nothing to add


def test_a_handle_of_a_relative_sqlite_url_names_the_file_it_looked_in(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = v1.versioned.trigger(1, database="sqlite:///here.db")
    with pytest.raises(TimeoutError) as info:
        run.result(timeout=0.05)
    assert str(info.value).endswith(f"no live worker serves queue 'default' (looked in the SQLite database "
                                    f"{tmp_path / 'here.db'})"), str(info.value)


def test_a_job_no_live_worker_can_run_stays_pending_and_says_why(store: Any) -> None:
    run = v1.versioned.trigger(1, database=store)
    [step] = views.run_view(store, run.id)["steps"]
    assert step["unserved"] == "no live worker serves queue 'default'"
    register(store, "w-gpu", V1, queues=("gpu",))
    register(store, "w-new", V2)
    view = views.run_view(store, run.id)
    assert view["definition"] == V1.fingerprint
    assert view["steps"][0]["unserved"] == f"no live worker has step 'a' of definition {V1.fingerprint[:8]}"
    assert [j["attempts"] for j in store.run_jobs(run.id)] == [0]
    register(store, "w-old", V1)
    assert views.run_view(store, run.id)["steps"][0]["unserved"] is None
    store.worker_stopped("w-old")
    assert views.run_view(store, run.id)["steps"][0]["unserved"] is not None


def test_runs_of_a_definition_are_listed_by_its_fingerprint(store: Any) -> None:
    old = v1.versioned.trigger(1, database=store)
    from tests.versions.version_support import v2
    new = v2.versioned.trigger(1, database=store)
    assert [r["id"] for r in fleet.runs_of(store, V1.fingerprint[:6])] == [old.id]
    assert [r["id"] for r in fleet.runs_of(store, V2.fingerprint)] == [new.id]
    assert fleet.runs_of(store, "-") == []
    with pytest.raises(ValueError, match="hexadecimal"):
        fleet.runs_of(store, "xyz")


# -- moving runs ------------------------------------------------------------------------------


def test_a_move_is_refused_when_a_job_would_have_no_step(store: Any) -> None:
    run = v1.versioned.trigger(1, database=store)
    assert drive(store, V1, steps=1) == ["a"]  # b waits now
    with pytest.raises(DefinitionNotFound):
        move_runs(store, V1.fingerprint, V2.fingerprint)  # no worker loaded v2 yet
    register(store, "w-new", V2)
    with pytest.raises(MoveRefused, match="'b'"):
        move_runs(store, V1.fingerprint, V2.fingerprint)
    with pytest.raises(MoveRefused, match="'nope'"):
        move_runs(store, V1.fingerprint, V2.fingerprint, {"b": "nope"})
    assert store.get_run(run.id)["definition"] == V1.fingerprint  # nothing written
    assert [(j["step"], j["definition"]) for j in store.run_jobs(run.id)] == [("a", V1.fingerprint),
                                                                              ("b", V1.fingerprint)]


def test_a_moved_run_finishes_on_the_new_definition_and_remembers_the_move(store: Any) -> None:
    run = v1.versioned.trigger(1, database=store)
    untouched = v1.versioned.trigger(5, database=store)
    assert drive(store, V1, steps=1) == ["a"]
    register(store, "w-new", V2)
    result = move_runs(store, V1.fingerprint[:8], V2.fingerprint[:8], parse_mapping(["b=b2"]), run_id=run.id)
    assert (result.moved, result.busy) == ([run.id], [])
    assert store.get_run(run.id)["definition"] == V2.fingerprint
    [move] = json.loads(store.get_run(run.id)["metadata"])["moves"]
    assert (move["from"], move["to"], move["steps"]) == (V1.fingerprint, V2.fingerprint, {"b": "b2"})
    assert store.get_run(untouched.id)["definition"] == V1.fingerprint
    assert drive(store, V2) == ["b2", "c"]
    final = store.get_run(run.id)
    assert final["status"] == "completed" and json.loads(final["output"]) == {"value": 4, "version": 2}
    assert drive(store, V1) == ["a", "b", "c"]  # the other run stayed on version 1


def test_a_run_with_an_attempt_running_is_left_for_later(store: Any) -> None:
    run = v1.versioned.trigger(1, database=store)
    [claimed] = store.claim("w", ["versioned"], 1, 60_000, definitions=[V1.fingerprint])
    register(store, "w-new", V2)
    # Step a exists in both: the mapping is complete, but a's attempt runs on an old worker.
    result = move_runs(store, V1.fingerprint, V2.fingerprint, {"b": "b2"})
    assert (result.moved, result.busy) == ([], [run.id])
    assert store.get_run(run.id)["definition"] == V1.fingerprint
    assert claimed.step == "a"


@pytest.mark.parametrize("pairs, error", [(["b"], "OLD=NEW"), (["b=x", "b=y"], "twice"),
                                          (["a=x", "b=x"], "both")])
def test_a_bad_mapping_is_refused(pairs: list[str], error: str) -> None:
    with pytest.raises(MoveRefused, match=error):
        parse_mapping(pairs)
