"""Reading the claim logs worker processes write with ``FLEET_CLAIM_LOG`` (see
tests/apps/fleet_app.py), and sampling how many jobs are ready meanwhile.

A *conflict* is a claim that returned fewer jobs than it asked for while more jobs
were ready than the fleet has slots (the ready count sampled just before and just
after the claim both say so): the claim lost rows to other claimers.
"""

from __future__ import annotations

import bisect
import glob
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg


@dataclass(frozen=True, slots=True)
class Claim:
    at: float  # monotonic, end of the claim
    seconds: float
    asked: int
    claimed: int


def read_claims(folder: str, since: float = 0.0, until: float = math.inf) -> list[Claim]:
    claims = []
    for path in glob.glob(os.path.join(folder, "claims-*.txt")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) != 4:
                    continue  # a worker killed mid-line
                claim = Claim(float(parts[0]), float(parts[1]), int(parts[2]), int(parts[3]))
                if since <= claim.at <= until:
                    claims.append(claim)
    return sorted(claims, key=lambda c: c.at)


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))]


class ReadySampler:
    """Samples the number of ready jobs (pending, not-before passed) every
    ``interval`` seconds on a direct connection, with monotonic timestamps."""

    def __init__(self, url: str, interval: float = 0.2) -> None:
        self.url = url
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(self.url, autocommit=True, application_name="bench-sampler") as conn:
            while not self._stop.is_set():
                row = conn.execute("SELECT count(*) FROM ductline_jobs WHERE status = 'pending' "
                                   "AND not_before_ms <= ductline_now_ms()").fetchone()
                self.samples.append((time.monotonic(), int(row[0]) if row else 0))
                self._stop.wait(self.interval)

    def __enter__(self) -> "ReadySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def conflicts(self, claims: list[Claim], slots: int) -> tuple[int, int]:
        """``(conflicts, claims while plenty was ready)``."""
        times = [t for t, _ in self.samples]
        plenty = conflicts = 0
        for claim in claims:
            i = bisect.bisect_left(times, claim.at)
            if i == 0 or i >= len(times):
                continue
            if min(self.samples[i - 1][1], self.samples[i][1]) <= slots:
                continue
            plenty += 1
            if claim.claimed < claim.asked:
                conflicts += 1
        return conflicts, plenty
