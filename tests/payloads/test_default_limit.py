"""The default inline limit, 1 MiB, byte for byte, with a worker on default settings."""

from __future__ import annotations

import payload_app as pa
from helpers import APP

from ductline.store import payloads

PAYLOAD_APP = APP.replace("rt_app.py", "payload_app.py")
MIB = 1_048_576


def test_default_inline_limit_is_one_mib(store, workers):
    workers(app=PAYLOAD_APP)
    at = pa.relayed.trigger([MIB, 1], database=store)
    above = pa.relayed.trigger([MIB + 1, 2], database=store)
    assert at.wait(90) == "completed" and above.wait(90) == "completed"
    outputs = {j["step"]: j["output"] for j in store.run_jobs(at.id)}
    assert len(outputs["produce"]) == MIB and payloads.parse_reference(outputs["produce"]) is None
    [job] = [j for j in store.run_jobs(above.id) if j["step"] == "produce"]
    assert payloads.parse_reference(job["output"]).size == MIB + 1
    assert above.output() == pa.blob(MIB + 1, 2) and at.output() == pa.blob(MIB, 1)
