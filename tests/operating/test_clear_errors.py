"""Bad input gets a clear error: attaching to a run id the database does not have,
and reading a value tagged by a newer ductline (handle, ``show``). Both backends."""

from __future__ import annotations

import subprocess
import sys

import pytest
import rt_app

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
    done = subprocess.run([sys.executable, "-m", "ductline", "show", handle.id, "--json", "--database", db_url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "TypeError: a value tagged 'quaternion' was written by a newer version of ductline" in done.stderr
    assert "Traceback" not in done.stderr
