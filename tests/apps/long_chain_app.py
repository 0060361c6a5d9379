"""A 5,000-step chain (no recursion anywhere: building, advancing, skipping), in a
module of its own: building it costs every process that imports it about a tenth of
a second, which the many workers and children importing rt_app should not pay."""

from __future__ import annotations

import time

from ductline import Pipeline


def hop(x):
    time.sleep(0.002)  # 5,000 hops take longer than the 3 s deadline on any machine
    return x + 1


long_chain = Pipeline("rt_long_chain", timeout=3).start(hop, name="hop_0")
for _i in range(1, 5000):
    long_chain.chain(to=hop, name=f"hop_{_i}")
