"""The run graph's model and layout (no database): columns, edges, states, summaries."""

from __future__ import annotations

import rt_app

from ductline.web.graph import NODE_W, build


def job(step: str, status: str = "completed", *, index: int | None = None, not_before_ms: int = 0,
        attempts: int = 1) -> dict:
    return {"step": step, "status": status, "elem_index": index, "not_before_ms": not_before_ms,
            "attempts": attempts, "scope": "" if index is None else str(index)}


def by_name(graph):
    return {n.name: n for n in graph.nodes}


def test_divide_and_combine_put_branches_in_parallel_columns():
    graph = build(rt_app.divided.definition(), [job("add_one"), job("branch_b", "running")], now_ms=0)
    nodes = by_name(graph)
    assert nodes["add_one"].x < nodes["branch_b"].x == nodes["branch_a"].x < nodes["branch_b2"].x < nodes["joined"].x
    assert nodes["branch_b"].y != nodes["branch_a"].y
    assert {(e.source, e.target, e.label) for e in graph.edges} == {
        ("add_one", "branch_b", "divide"), ("add_one", "branch_a", "divide"), ("branch_b", "branch_b2", ""),
        ("branch_b2", "joined", "combine"), ("branch_a", "joined", "combine")}
    assert nodes["branch_b"].state == "running" and nodes["branch_a"].state == "not_reached"
    assert not [e for e in graph.edges if e.target == "branch_a"][0].reached
    assert graph.width >= 4 * NODE_W and graph.states == ["running", "completed", "not_reached"]


def test_divert_edges_are_labelled_with_their_routes():
    graph = build(rt_app.diverted.definition(), [job("route"), job("on_small")], now_ms=0)
    labels = {(e.source, e.target): e.label for e in graph.edges}
    assert labels[("route", "on_big")] == "big" and labels[("route", "on_small")] == "otherwise"
    assert by_name(graph)["on_big"].state == "not_reached"


def test_expanded_step_counts_and_worst_state_wins():
    jobs = [job("make_list")] + [job("slow_square", s, index=i) for i, s in
                                 enumerate(["completed", "completed", "failed", "pending", "running"])]
    jobs[4]["not_before_ms"] = 10_000  # pending and not yet due: delayed
    node = by_name(build(rt_app.fan.definition(), jobs, now_ms=5_000))["slow_square"]
    assert node.state == "failed" and node.expanded
    assert node.summary == "2/5 done" and node.counts == {"completed": 2, "failed": 1, "delayed": 1, "running": 1}
    widths = {state: width for state, _, width in node.segments}
    assert set(widths) == {"completed", "failed", "delayed", "running"} and widths["completed"] > widths["failed"]


def test_delayed_single_step_carries_its_not_before_time():
    node = by_name(build(rt_app.chain.definition(), [job("add_one", "pending", not_before_ms=9_000, attempts=0)],
                         now_ms=1_000))["add_one"]
    assert (node.state, node.not_before_ms, node.summary) == ("delayed", 9_000, "delayed")


def test_without_a_definition_steps_follow_creation_order_and_on_halt_hangs_below():
    jobs = [job("b"), job("a", "failed", attempts=3), job("__on_halt__", "pending")]
    graph = build(None, jobs, now_ms=0)
    assert [n.name for n in graph.nodes] == ["b", "a", "__on_halt__"]
    assert [(e.source, e.target) for e in graph.edges] == [("b", "a")]
    nodes = by_name(graph)
    assert nodes["a"].summary == "failed · 3 attempts"
    assert nodes["__on_halt__"].label == "on_halt" and nodes["__on_halt__"].y > nodes["a"].y
    assert not graph.from_definition


def test_steps_unknown_to_the_definition_are_still_drawn():
    graph = build(rt_app.chain.definition(), [job("add_one"), job("renamed_step", "failed")], now_ms=0)
    assert by_name(graph)["renamed_step"].state == "failed"


def test_a_throttled_job_is_its_own_state():
    pending = job("add_one", "pending", not_before_ms=0, attempts=0)
    pending["throttled"] = 1
    node = by_name(build(rt_app.chain.definition(), [pending], now_ms=1_000))["add_one"]
    assert (node.state, node.summary) == ("throttled", "throttled: waiting for a concurrency slot")


def test_nodes_carry_their_timeout_and_attempt_budget_and_edges_their_delay():
    graph = build(rt_app.deadline_in_delay.definition(), [job("quick")], now_ms=0)
    nodes = by_name(graph)
    assert nodes["quick"].policy == "no timeout · 3 attempts"
    assert "3 attempts (errors and timeouts share them), retried after" in nodes["quick"].policy_detail
    assert [e.label for e in graph.edges if e.target == "after"] == ["delay 30s"]
    timed = by_name(build(rt_app.timeout_pipeline.definition(), [], now_ms=0))["sleep_in_c"]
    assert timed.policy == "timeout 1s · 2 attempts"
    assert "retried after 0s" in timed.policy_detail and "step timeout 1s" in timed.policy_detail


def test_without_a_definition_the_stored_limits_label_the_node():
    stored = {**job("a", "failed", attempts=3), "timeout_seconds": 90, "max_retry": 1, "retry_delay_seconds": 10}
    node = by_name(build(None, [stored], now_ms=0))["a"]
    assert node.policy == "timeout 1m30s · 1 attempt"
    assert node.policy_detail == "step timeout 1m30s; 1 attempt, retried after 10s"
