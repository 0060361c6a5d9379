"""An exception class defined in a script run as ``python script.py`` is named
``__main__.Name`` in the script, where ``no_retry_on``/``retry_on`` name it, and
``<stem>.Name`` in the child that imported the script again: ``execute`` maps the
child's name back, so the option matches."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent('''
    import json
    import ductline

    class RefusedByPartner(Exception):
        pass

    def send(x):
        raise RefusedByPartner("no")

    pipeline = ductline.Pipeline("main_script_errors").start(
        send, max_retry=3, retry_delay=0, no_retry_on=[RefusedByPartner])

    if __name__ == "__main__":
        result = ductline.execute(pipeline, 1)
        step = result.step("send")
        print(json.dumps({"status": result.status, "attempts": step.attempts, "error_type": step.error_type,
                          "halt": result.metadata.get("halt_reason")}))
''')


def test_no_retry_on_a_class_from_the_main_script_matches(tmp_path: Path) -> None:
    script = tmp_path / "partner_calls.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"status": "halted", "attempts": 1, "error_type": "__main__.RefusedByPartner",
                     "halt": "non_retryable_error"}


UNGUARDED = textwrap.dedent('''
    import json
    import ductline

    def double(x):
        return 2 * x

    pipeline = ductline.Pipeline("unguarded").start(double, max_retry=1)

    # No `if __name__ == "__main__":` guard: the child importing this file to find
    # `double` runs this line again.
    try:
        ductline.execute(pipeline, 1)
    except ductline.DefinitionError as exc:
        print(json.dumps({"refused": str(exc)}))
''')


def test_execute_at_a_script_s_top_level_fails_at_once_saying_how_to_fix_it(tmp_path: Path) -> None:
    """Children import the script to find its steps: an unguarded `execute` there is
    refused in the child (it used to start children of its own, and the first attempt
    waited out the 60 s start-up timeout), and execute raises at once with the fix named."""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert "ductline.execute() was called while ductline imported" in found["refused"]
    assert 'put the call under `if __name__ == "__main__":`' in found["refused"]


def test_a_run_started_while_a_child_imports_its_apps_is_refused(tmp_path: Path) -> None:
    import ductline
    from ductline.execution import importing

    pipeline = ductline.Pipeline("refused_at_import").start(json.dumps)
    database = f"sqlite:///{tmp_path}/refused.db"
    with importing.importing("app.py"):
        for start in (lambda: pipeline.trigger(1, database=database),
                      lambda: pipeline.trigger_many([1, 2], database=database),
                      lambda: ductline.execute(pipeline, 1)):
            with pytest.raises(RuntimeError, match=r"while ductline imported app\.py"):
                start()
    assert not (tmp_path / "refused.db").exists()  # nothing was written
    assert pipeline.trigger(1, database=database).id  # after the import: allowed


STDIN_PIPELINE = textwrap.dedent('''
    import time
    import ductline

    def send(x):
        return x

    pipeline = ductline.Pipeline("from_stdin").start(send, retry_delay=10)
    began = time.monotonic()
    try:
        ductline.execute(pipeline, 1)
    except ductline.DefinitionError as exc:
        print("refused after", round(time.monotonic() - began, 1), "s:", exc)
''')


def test_steps_defined_in_python_stdin_are_refused_at_once(tmp_path: Path) -> None:
    """A child cannot import a step typed into ``python -``: execute says why at once
    instead of retrying the attempt (three times, ten seconds apart)."""
    done = subprocess.run([sys.executable, "-"], input=STDIN_PIPELINE, capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "refused after" in done.stdout, done.stdout + done.stderr
    assert "defined in __main__ without a file" in done.stdout
    assert float(done.stdout.split("refused after ")[1].split(" s")[0]) < 10  # not a retry delay later


def test_steps_a_child_cannot_import_are_refused_at_once(tmp_path: Path) -> None:
    """A module the parent imported but a fresh process cannot (it fails there):
    the first child started says so, and execute raises DefinitionError with why."""
    (tmp_path / "only_here.py").write_text(textwrap.dedent('''
        import sys
        if "ductline.execution.child" in " ".join(sys.argv) or sys.argv[0] == "-c":
            raise ImportError("this module imports only in the parent")

        def send(x):
            return x
    '''))
    script = tmp_path / "run_it.py"
    script.write_text(textwrap.dedent('''
        import ductline
        import only_here

        pipeline = ductline.Pipeline("only_here").start(only_here.send, retry_delay=10)
        try:
            ductline.execute(pipeline, 1)
        except ductline.DefinitionError as exc:
            print("refused:", exc)
    '''))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "this module imports only in the parent" in done.stdout, done.stdout
