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
