"""Long and wide pipelines: nothing in the executor recurses per step, so a
5,000-step chain runs like a 5-step one."""

from __future__ import annotations

import sys
import uuid

import pytest

import ductline
import local_steps as s
from ductline import Pipeline


def chain_of(step: object, length: int) -> Pipeline:
    """One module-level function under ``length`` names (``name=`` makes each a step)."""
    pipeline = Pipeline(f"scale_{uuid.uuid4().hex[:10]}").start(step, name="s0")
    for i in range(1, length):
        pipeline.chain(to=step, name=f"s{i}")
    return pipeline


@pytest.mark.timeout(600)  # a few seconds alone; minutes on a machine many test processes share
def test_a_5000_step_chain_of_async_steps() -> None:
    pipeline = chain_of(s.async_add_one, 5000)
    definition = pipeline.definition()
    assert len(definition.nodes) == 5000
    assert {node.ref for node in definition.nodes.values()} == {"local_steps:async_add_one"}
    result = ductline.execute(pipeline, 0)
    assert result.overall_status == "success"
    assert result.output == 5000
    assert len(result.steps) == 5000
    assert [r.step for r in result.steps[:3]] == ["s0", "s1", "s2"]
    assert result.steps[-1].step == "s4999" and result.steps[-1].output == 5000


def test_a_claim_does_not_rescan_the_definition(monkeypatch: pytest.MonkeyPatch) -> None:
    """The queues a run may use are read from its definition once, not per claim:
    per claim, a chain of n steps cost n x n node lookups."""
    from ductline.dsl.graph import Definition

    reads = []
    original = Definition.queues

    def counted(self: Definition) -> list[str]:
        reads.append(self.name)
        return original.fget(self)  # type: ignore[no-any-return,union-attr]

    monkeypatch.setattr(Definition, "queues", property(counted))
    result = ductline.execute(chain_of(s.add_one, 50), 0)
    assert result.output == 50
    assert len(reads) <= 2


def test_a_long_chain_of_sync_steps_reuses_one_child() -> None:
    pipeline = chain_of(s.add_one, 1000)
    limit = sys.getrecursionlimit()
    result = ductline.execute(pipeline, 0, concurrency=1)
    assert result.output == 1000
    assert sys.getrecursionlimit() == limit


def test_a_5000_step_chain_timed_out_skips_every_remaining_step() -> None:
    pipeline = chain_of(s.async_sleep_long, 5000)
    result = ductline.execute(pipeline, 0, timeout=0.5)
    assert result.metadata["timeout_exceeded"] is True
    assert result.steps[0].status == "failed"
    assert [r.status for r in result.steps[1:]] == ["skipped"] * 4999
    assert all(r.skip_reason == "workflow timeout" for r in result.steps[1:])


def test_a_wide_expand() -> None:
    pipeline = (Pipeline(f"scale_{uuid.uuid4().hex[:10]}").start(s.make_list)
                .expand(to=s.async_add_one).collapse(into=s.gather))
    result = ductline.execute(pipeline, 3000)
    assert result.output == list(range(1, 3001))
