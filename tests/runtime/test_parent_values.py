"""A worker parent never builds a user value (DESIGN.md, "The parent never runs user
code"): it reads outputs as structure, splits an expand's list, gathers a fan-in
and routes a divert without importing or calling user types. A step's child
builds them, once per step that takes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ductline.handle import RunHandle
from helpers import start_worker, stop_worker, wait_for

APP = str(Path(__file__).parent.parent / "apps" / "typed_app.py")


@pytest.fixture
def typed_env(tmp_path: Path) -> dict[str, str]:
    return {"TYPED_PIDS": str(tmp_path / "pids"), "TYPED_POISON": str(tmp_path / "poison"),
            "DUCTLINE_RETRY_DELAY": "0"}


def _settled(handle: RunHandle, store: object = None) -> str:
    """The run's status once it settled and (given ``store``) no attempt of it is open:
    a halted run's sibling may still be running."""
    wait_for(lambda: handle.status() in ("completed", "halted", "failed") and (
        store is None or all(a["result"] is not None for a in store.run_attempts(handle.id))),  # type: ignore[attr-defined]
        timeout=60)
    return handle.status()


def test_an_expand_of_dataclasses_is_split_without_building_them_in_the_parent(
        db_url: str, store: object, typed_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in typed_env.items():
        monkeypatch.setenv(key, value)
    import typed_app

    worker = start_worker(db_url, app=APP, env=typed_env)
    try:
        handle = typed_app.expand_items.trigger(4, database=db_url)
        assert _settled(handle) == "completed"
        assert handle.output() == 2 * (0 + 1 + 2 + 3)
        pids = {int(line) for line in Path(typed_env["TYPED_PIDS"]).read_text().split()}
    finally:
        stop_worker(worker)
    assert worker.pid not in pids, "the worker parent built an Item"
    assert pids, "no child built an Item"


def test_a_user_value_that_fails_to_build_fails_the_step_that_takes_it_once(
        db_url: str, store: object, typed_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in typed_env.items():
        monkeypatch.setenv(key, value)
    import typed_app

    worker = start_worker(db_url, app=APP, env=typed_env)
    try:
        handle = typed_app.poisoned.trigger(2, database=db_url)
        assert _settled(handle, store) == "halted"
        attempts = store.run_attempts(handle.id)  # type: ignore[attr-defined]
        jobs = {j["id"]: j["step"] for j in store.run_jobs(handle.id)}  # type: ignore[attr-defined]
    finally:
        stop_worker(worker)
    source = [a for a in attempts if jobs[a["job_id"]] == "poisoned_items"]
    assert [a["result"] for a in source] == ["succeeded"], "the source step ran again"
    elements = [a for a in attempts if jobs[a["job_id"]] == "double"]
    assert elements and all(a["result"] == "errored" for a in elements)
    assert all("was built after its step returned" in (a["error"] or "") for a in elements), elements
    assert not any(a["error_type"] == "WorkerLost" for a in attempts)


def test_a_divert_on_an_enum_routes_by_the_child_s_rendering(
        db_url: str, store: object, typed_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in typed_env.items():
        monkeypatch.setenv(key, value)
    import typed_app

    worker = start_worker(db_url, app=APP, env=typed_env)
    try:
        large = typed_app.divert_enum.trigger(50, database=db_url)
        small = typed_app.divert_enum.trigger(5, database=db_url)
        assert _settled(large) == "completed" and _settled(small) == "completed"
        assert (large.output(), small.output()) == ("big:LARGE", "small:SMALL")
    finally:
        stop_worker(worker)


def test_a_schedule_s_stored_arguments_start_its_runs_without_being_built(
        db_url: str, store: object, typed_env: dict[str, str], tmp_path: Path) -> None:
    """A worker firing a schedule passes the stored arguments on as they are; only the
    step's child builds the dataclass (builds at import time are not counted)."""
    armed = tmp_path / "armed"
    env = {**typed_env, "TYPED_SCHEDULE": "1", "TYPED_ARMED": str(armed)}
    worker = start_worker(db_url, app=APP, env=env)
    try:
        wait_for(lambda: store.list_workers(), timeout=60)  # type: ignore[attr-defined]
        armed.touch()
        wait_for(lambda: any(r["status"] == "completed" and r["pipeline"] == "typed_scheduled"
                             for r in store.list_runs()), timeout=60)  # type: ignore[attr-defined]
    finally:
        stop_worker(worker)
    pids = {int(line) for line in Path(typed_env["TYPED_PIDS"]).read_text().split()}
    assert pids and worker.pid not in pids, "the worker parent built the schedule's argument"
