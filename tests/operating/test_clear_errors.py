"""Bad input gets a clear error: attaching to a run id the database does not have,
and reading a value tagged by a newer ductline (handle, ``show``). Both backends. The
commands run by the command line's entry point in the test process
(`helpers.ductline_in_process`)."""

from __future__ import annotations

import pytest
import rt_app
from helpers import ductline_in_process

from ductline.errors import RunNotFound
from ductline.handle import RunHandle, _without_password


def test_attaching_to_a_missing_run_names_the_id_and_the_database(store, db_url):
    with pytest.raises(RunNotFound) as caught:
        RunHandle.attach("f" * 32, database=db_url)
    message = str(caught.value)
    assert message.startswith(f"cannot attach to run '{'f' * 32}': no run has that id in {db_url}")
    assert "ductline runs" in message
    with pytest.raises(RunNotFound, match="no run has that id"):
        RunHandle.attach("", database=store)


def test_attaching_to_a_sqlite_file_that_does_not_exist_creates_none(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DUCTLINE_DATABASE_URL", raising=False)
    monkeypatch.delenv("DUCTLINE_CONFIG", raising=False)
    for database in (f"sqlite:///{tmp_path}/missing.db", None):  # None: the default, ductline.db here
        with pytest.raises(RunNotFound, match=r"cannot attach to run 'abcdef': no database at .*\.db"):
            RunHandle.attach("abcdef", database=database)
    assert list(tmp_path.iterdir()) == []


def test_a_password_is_never_shown():
    assert _without_password("postgresql://app:s3cret@db.example:5433/jobs") == \
        "postgresql://app:***@db.example:5433/jobs"
    assert _without_password("sqlite:///tmp/x.db") == "sqlite:///tmp/x.db"


def test_a_value_from_a_newer_version_is_refused_clearly(store, db_url):
    handle = rt_app.chain.trigger(1, database=store, delay=3600)
    future = '{"__ductline__": "quaternion", "value": [1, 0, 0, 0]}'
    with store.dialect.transaction() as s:
        getattr(s, "_conn").execute(f"UPDATE ductline_runs SET output = '{future}' WHERE id = '{handle.id}'")
    with pytest.raises(TypeError, match="a value tagged 'quaternion' was written by a newer version of ductline "
                                        "than this one .*upgrade ductline where it is read"):
        handle.output()
    done = ductline_in_process("show", handle.id, "--json", "--database", db_url)
    assert done.returncode != 0
    assert "TypeError: a value tagged 'quaternion' was written by a newer version of ductline" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_run_id_prefix_too_short_to_look_up_says_so(store, db_url):
    """A prefix shorter than 6 characters is not looked up; the error says why, instead
    of only that no run has that id (a run that starts with it may well exist)."""
    from ductline.views import resolve_run_id

    handle = rt_app.chain.trigger(1, database=store, delay=3600)
    assert resolve_run_id(store, handle.id[:6]) == handle.id
    with pytest.raises(RunNotFound, match=rf"run '{handle.id[:5]}' not found \(a prefix of a run id needs at "
                                          r"least 6 characters\)"):
        resolve_run_id(store, handle.id[:5])


def test_runs_refuses_a_status_that_does_not_exist(db_url):
    done = ductline_in_process("runs", "--status", "bogus", "--database", db_url)
    assert done.returncode == 2
    assert "'bogus' is not one of" in done.stderr and "'completed'" in done.stderr


def _cli(db_url, *args):
    return ductline_in_process(*args, "--database", db_url)


def test_runs_of_a_pipeline_without_runs_says_so_on_stderr(store, db_url):
    rt_app.chain.trigger(1, database=store, delay=3600)
    for extra in ((), ("--json",)):
        done = _cli(db_url, "runs", "--pipeline", "nope", *extra)
        assert done.returncode == 0, done.stderr  # an empty answer to a valid filter
        assert done.stderr.strip() == "note: no pipeline named 'nope' has runs; pipelines with runs: rt_chain"
    assert _cli(db_url, "runs", "--pipeline", "nope", "--json").stdout.strip() == "[]"
    # A pipeline that has runs, none with this status: an empty answer, nothing to note.
    done = _cli(db_url, "runs", "--pipeline", "rt_chain", "--status", "completed", "--json")
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "[]", "")


def test_logs_of_a_step_the_run_does_not_have_is_an_error_naming_its_steps(store, db_url):
    handle = rt_app.chain.trigger(1, database=store, delay=3600)
    # Unsettled, its definition unrecorded (no worker loaded it): later steps may come, so no verdict.
    done = _cli(db_url, "logs", handle.id, "--step", "nostep")
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    handle.cancel()
    done = _cli(db_url, "logs", handle.id, "--step", "nostep")
    assert (done.returncode, done.stdout) == (2, "")
    assert f"run {handle.id} has no step 'nostep'; its steps: add_one" in done.stderr
    done = _cli(db_url, "logs", handle.id, "--step", "add_one")
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.strip() == f"no log records for run {handle.id}, step 'add_one'"
