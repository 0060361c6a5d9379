"""Outcomes are recorded on a thread of their own (`ductline.runtime.outbox`): while a
recording transaction waits on the database, the worker's loop goes on starting the
jobs it claimed ahead, and what the recording changes in the worker is applied once
it committed. A real worker loop (real children) on the real database, with one
recording transaction held open by the test."""

from __future__ import annotations

import resource
import select
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apps"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
import ahead_app  # noqa: E402
from contract_support import pausing_store  # noqa: E402

from ductline.config import load_settings  # noqa: E402
from ductline.runtime.ahead import Ahead  # noqa: E402
from ductline.runtime.launch import build_worker  # noqa: E402

APP = str(Path(__file__).resolve().parents[1] / "apps" / "ahead_app.py")
RUNS = 60


def marks(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


@contextmanager
def running(worker, paused=None):
    """Run ``worker``'s loop on a thread for the block. On the way out a transaction
    held by ``paused`` (``(store, PausingDialect)``) is let go first, then the loop
    stops and that store is closed."""
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, kwargs={"stop_when": stop.is_set}, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        if paused is not None:
            paused[1].go.set()
        stop.set()
        thread.join(30)
        if paused is not None:
            paused[0].close()


# PostgreSQL: SQLite has one writer, so there a heartbeat due while the test holds the
# recording open would wait for it (a real recording commits within milliseconds).
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_the_loop_starts_queued_jobs_while_a_recording_waits(store, db_url, tmp_path, monkeypatch):
    path = tmp_path / "marks.txt"
    monkeypatch.setenv("AHEAD_MARKS", str(path))
    monkeypatch.setenv("DUCTLINE_SPARE_CHILDREN", "0")
    handles = [ahead_app.ahead.trigger(f"r{i}", database=store) for i in range(RUNS)]
    # The first recording transaction that starts while at least two jobs wait in the
    # queue ahead stops after its first statement until the test says go.
    built, at_pause = [], []

    def two_queued() -> bool:  # runs on the recorder's thread, inside the transaction
        if len(built[0].ahead) < 2:
            return False
        at_pause.append(len(marks(path)))
        return True

    paused, dialect = pausing_store(db_url, after="complete_close_jobs", when=two_queued)
    worker = build_worker(paused, [APP], 1, load_settings(database_url=db_url, poll_interval=0.1))
    built.append(worker)
    with running(worker, (paused, dialect)) as thread:
        assert dialect.reached.wait(60), "no recording started with two jobs queued"
        # One slot: a loop blocked in the recording could start at most the attempt it
        # had handed out just before; this one starts the jobs queued ahead meanwhile.
        wait_for(lambda: len(marks(path)) >= at_pause[0] + 2, timeout=30)
        # The queue runs dry while the recording still waits: the slot is free and a
        # claim is due, but the loop waits for the recording instead of spinning.
        wait_for(lambda: worker.slots[0].free and not len(worker.ahead), timeout=30)
        cpu = resource.getrusage(resource.RUSAGE_SELF)
        time.sleep(0.5)
        spent = resource.getrusage(resource.RUSAGE_SELF)
        assert (spent.ru_utime + spent.ru_stime) - (cpu.ru_utime + cpu.ru_stime) < 0.25
        assert not dialect.go.is_set()
        dialect.go.set()
        for handle in handles:
            assert handle.wait(60) == "completed"
    assert not thread.is_alive()
    assert sorted(marks(path)) == sorted(f"r{i}" for i in range(RUNS))  # each step ran once


def test_a_chain_alone_is_claimed_by_its_recordings(store, db_url, monkeypatch):
    """A step's completion is recorded in the transaction that claims the next step,
    and that claim stands for the loop's: when it comes up short it reads the timers
    too, so the loop claims nothing after it -- neither for the recorder's wake-up nor
    for the notification its own transaction sent. (Each of those claims found
    nothing and held the next step's result behind a round trip.)"""
    from ductline.store.tx import Tx

    monkeypatch.setenv("DUCTLINE_SPARE_CHILDREN", "0")
    loop_claims: list[int] = []
    claim = Tx.claim

    def counted(self, *args, **kwargs):
        jobs = claim(self, *args, **kwargs)
        if not threading.current_thread().name.startswith("ductline-record"):  # the loop's, not a recording's
            loop_claims.append(len(jobs))
        return jobs

    monkeypatch.setattr(Tx, "claim", counted)
    worker = build_worker(store, [APP], 1, load_settings(database_url=db_url, poll_interval=5))
    with running(worker):
        assert ahead_app.chain.trigger(0, database=store).wait(60) == "completed"  # warm
        before = len(loop_claims)
        handle = ahead_app.chain.trigger(100, database=store)
        assert handle.wait(60) == "completed"
        assert handle.output() == 120
        during = loop_claims[before:]
    # The first step is the loop's to claim (notified, or polled on SQLite every
    # 0.25 s, which a slow machine may also do a few times during the chain); the 19
    # hops are not: before, each was followed by a claim of the loop.
    assert 1 <= len(during) <= 6, during


def test_a_chain_alone_is_recorded_on_the_loops_own_thread(store, db_url, monkeypatch):
    """A worker that runs nothing else records a hand-over on its loop's thread: the
    recorder's thread would only add two wake-ups to the hop (the recorder's, then the
    loop's to start the next step) while the loop had nobody else to serve."""
    from ductline.runtime import outbox

    monkeypatch.setenv("DUCTLINE_SPARE_CHILDREN", "0")
    threads: list[str] = []
    record = outbox.record_batch

    def noted(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return record(*args, **kwargs)

    monkeypatch.setattr(outbox, "record_batch", noted)
    worker = build_worker(store, [APP], 2, load_settings(database_url=db_url, poll_interval=5))
    with running(worker) as loop:
        assert ahead_app.chain.trigger(0, database=store).wait(60) == "completed"  # warm
        before = len(threads)
        handle = ahead_app.chain.trigger(100, database=store)
        assert handle.wait(60) == "completed"
        assert handle.output() == 120
        during = threads[before:]
    # Each of the 20 steps' completions is recorded once; those that handed the next
    # step over (all but a step claimed by the loop's poll) ran on the loop's thread.
    assert len(during) == 20, during
    assert during.count(loop.name) >= 17, during


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_a_slot_freed_by_a_failure_gets_its_next_job_before_the_failure_is_recorded(store, db_url, tmp_path,
                                                                                     monkeypatch):
    """A failure is recorded with several statements (its budget, the attempt, the job,
    perhaps halting the run); the slot it freed gets its next job from a quick claim
    first. Here the failure's recording is held open after its first statement of its
    own (the job's budget): the next job runs meanwhile."""
    path = tmp_path / "marks.txt"
    monkeypatch.setenv("AHEAD_MARKS", str(path))
    monkeypatch.setenv("DUCTLINE_SPARE_CHILDREN", "0")
    failed = ahead_app.failing.trigger("fail", database=store, priority=5)  # claimed first
    after = ahead_app.failing.trigger("next", database=store)
    paused, dialect = pausing_store(db_url, after="job_budget")
    worker = build_worker(paused, [APP], 1, load_settings(database_url=db_url, poll_interval=0.1))
    with running(worker, (paused, dialect)) as thread:
        assert dialect.reached.wait(60), "the failure was never recorded"
        wait_for(lambda: "next" in marks(path), timeout=60)
        assert not dialect.go.is_set()
        dialect.go.set()
        assert failed.wait(60) == "halted"
        assert after.wait(60) == "completed"
    assert not thread.is_alive()
    assert marks(path) == ["fail", "next"]


def test_a_worker_ignores_only_its_own_notifications():
    """The payload of a recording's notification is its worker's id: that worker's
    wake-up ignores it; another's, a trigger's ('') and a cancel still wake it."""
    from ductline.runtime.wakeup import Wakeup

    mine = Wakeup(origin="w1")
    mine.wake("w1")
    assert not mine.pending() and not mine.take_cancel()
    for payload in ("w2", ""):
        mine.wake(payload)
        assert mine.pending()
        mine.clear()
    mine.wake("cancel")
    assert mine.pending() and mine.take_cancel()
    mine.clear()
    mine.nudge()  # wakes the loop (the pipe) without asking for a claim
    assert not mine.pending()
    assert select.select([mine.fileno()], [], [], 0)[0]


def test_the_queue_covers_one_recording():
    """While attempts are short and runs under way are claimed, the queue holds what a
    slot runs during one recording (and the one after), between `DEPTH` and
    `CHAIN_DEPTH` per slot."""
    from ductline.runtime.ahead import CHAIN_DEPTH, DEPTH

    ahead = Ahead()
    assert ahead.room(2) == 0  # no attempt seen yet: nothing is queued
    ahead.observe(1 / 64)
    assert ahead.room(2) == 2 * DEPTH
    ahead.observe_recording(1 / 8)  # eight attempts per recording, and the one after
    assert ahead.room(2) == 2 * 9
    ahead.observe_recording(10.0)
    ahead.observe_recording(10.0)
    assert ahead.room(1) == CHAIN_DEPTH
    ahead.observe(5.0)  # attempts turned long: no queue
    assert ahead.room(2) == 0
    assert Ahead(depth=0).room(4) == 0


def test_jobs_that_hand_on_nothing_queue_their_span_of_work():
    """While hardly any claimed job readies a next step as it completes (last steps,
    elements of an expand), the queue holds what a slot runs in `AHEAD_SECONDS` or
    during one recording, whichever is longer (and the one after), up to `MAX_DEPTH`;
    once claimed jobs ready next steps again, it holds one recording's worth."""
    from ductline.runtime.ahead import AHEAD_SECONDS, CHAIN_DEPTH, DEPTH, MAX_DEPTH

    assert AHEAD_SECONDS == 0.05
    ahead = Ahead()
    ahead.observe(1 / 64)
    for _ in range(20):
        ahead.observe_claim(10, 0)
    assert ahead.room(2) == 2 * 5  # 50 ms of 15.6 ms attempts: 3.2, so 4, and the one after
    ahead.observe_recording(1 / 8)
    assert ahead.room(2) == 2 * 9  # a recording lasts longer than 50 ms here
    instant = Ahead()
    instant.observe(0.0001)
    for _ in range(20):
        instant.observe_claim(10, 0)
    assert instant.room(2) == 2 * MAX_DEPTH
    instant.observe_claim(10, 10)  # chains again: one recording's worth
    assert instant.room(2) == 2 * DEPTH
    instant.observe_recording(10.0)
    assert instant.room(1) == CHAIN_DEPTH
    slowish = Ahead()
    slowish.observe(0.04)  # 50 ms hold 1.25 of them: the floor
    for _ in range(20):
        slowish.observe_claim(10, 0)
    assert slowish.room(3) == 3 * DEPTH


def test_a_backlog_claim_fills_the_queue_for_when_it_lands():
    """In a backlog (claimed jobs hand on nothing: a drain), the children start what is
    queued while the claim's recording runs: the claim fills the queue for when it
    lands, counting what is queued now as started by then, up to a full queue (a worker
    keeps at most two queues' worth). Next steps of runs under way fill it for now."""
    from ductline.runtime.ahead import CHAIN_DEPTH, MAX_DEPTH
    from ductline.store.records import ClaimedJob

    def jobs(n):
        return [ClaimedJob(job_id=f"j{i}", run_id=f"j{i}", pipeline="p", step="s", scope="", input="[]",
                           attempt=1, lease_token=f"j{i}", timeout_seconds=None, boundary=None, not_before_ms=0,
                           started_ms=0, deadline_ms=None, run_deadline_ms=None) for i in range(n)]

    ahead = Ahead()
    ahead.observe(0.0005)
    ahead.observe_claim(60, 0)  # one claim of sixty jobs that hand on nothing: a backlog
    ahead.observe_recording(0.01)
    full = 2 * MAX_DEPTH
    assert ahead.room(2) == full
    ahead.add(jobs(full), confirmed=0.0)
    assert ahead.room(2) == full  # a full queue now is started by the time the claim lands
    ahead.add(jobs(full // 2), confirmed=0.0)
    assert ahead.room(2) == full // 2
    ahead.add(jobs(full // 2), confirmed=0.0)
    assert ahead.room(2) == 0  # two queues' worth: the most a worker keeps

    chains = Ahead()
    chains.observe(0.0005)
    chains.observe_recording(0.01)
    chains.add(jobs(2 * CHAIN_DEPTH), confirmed=0.0)
    assert chains.room(2) == 0  # next steps of runs under way: one queue's worth


def test_which_transitions_hand_on_at_once():
    """A completion readies the next step at once, except into a combine or a collapse
    (they wait for their siblings); a last step has no next."""
    from ductline import Pipeline

    chained = Pipeline("hands_on_chain").start(echo, name="a").chain(to=echo, name="b").definition()
    assert chained.nodes["a"].next.hands_on and chained.nodes["b"].next is None
    fanned = Pipeline("hands_on_expand").start(twice, name="m").expand(to=echo, name="e").collapse(
        into=echo, name="c").definition()
    assert fanned.nodes["m"].next.hands_on  # the expand creates the elements at once
    assert not fanned.nodes["e"].next.hands_on  # an element's collapse waits for the others


def echo(x):
    return x


def twice(x):
    return [x, x]


def test_a_queued_job_is_given_back_halfway_to_its_run_deadline():
    """Queued jobs are overdue `OVERDUE_SECONDS` after their claim; a job of a run
    with a deadline, halfway from its claim to that deadline, so it is given back
    (for another worker to run) long before the deadline passes."""
    from ductline.runtime.ahead import OVERDUE_SECONDS
    from ductline.store.records import ClaimedJob

    def job(name):
        return ClaimedJob(job_id=name, run_id=name, pipeline="p", step="s", scope="", input="[]", attempt=1,
                          lease_token=name, timeout_seconds=None, boundary=None, not_before_ms=0, started_ms=0,
                          deadline_ms=None, run_deadline_ms=None)

    ahead = Ahead()
    assert ahead.due_at() is None and not ahead.overdue(1e9)
    ahead.add([job("plain")], confirmed=10.0)
    assert ahead.due_at() == 10.0 + OVERDUE_SECONDS
    ahead.add([job("bounded"), job("other")], confirmed=11.0,
              run_deadline=lambda j: 13.0 if j.job_id == "bounded" else None)
    assert ahead.due_at() == 12.0
    assert not ahead.overdue(11.99) and ahead.overdue(12.0)


def test_a_queue_behind_attempts_that_turned_long_is_given_back_at_once():
    """Claimed while attempts were short, a queue behind attempts that then stay long
    is given back once it holds more than `BACKLOG_SECONDS` of them per slot, not
    after `OVERDUE_SECONDS`: idle workers run it meanwhile. One long attempt among
    short ones does not do it."""
    from ductline.runtime.ahead import BACKLOG_SECONDS, OVERDUE_SECONDS
    from ductline.store.records import ClaimedJob

    jobs = [ClaimedJob(job_id=f"j{i}", run_id=f"j{i}", pipeline="p", step="s", scope="", input="[]", attempt=1,
                       lease_token=f"j{i}", timeout_seconds=None, boundary=None, not_before_ms=0, started_ms=0,
                       deadline_ms=None, run_deadline_ms=None) for i in range(20)]
    ahead = Ahead()
    for _ in range(10):
        ahead.observe(0.001)
    ahead.add(jobs, confirmed=0.0)
    ahead.observe(0.4)  # one long attempt: the average stays short
    assert not ahead.overdue(1.0, usable_slots=2)
    ahead.observe(0.4)  # they stay long: 20 jobs of 0.14 s on 2 slots hold 1.4 s each
    assert ahead.overdue(1.0, usable_slots=2)
    assert 1.0 < OVERDUE_SECONDS
    assert not ahead.overdue(1.0, usable_slots=4)  # 0.7 s per slot: kept
    assert BACKLOG_SECONDS == 1.0


def test_the_queue_keeps_the_claim_order():
    """A job of a run under way claimed later goes ahead of queued first steps; a higher
    priority ahead of both; at equal rank the older claim first."""
    from ductline.model.claim_order import FIRST_STEP, UNDER_WAY
    from ductline.store.records import ClaimedJob

    def job(name, priority=0, phase=FIRST_STEP):
        return ClaimedJob(job_id=name, run_id=name, pipeline="p", step="s", scope="", input="[]", attempt=1,
                          lease_token=name, timeout_seconds=None, boundary=None, not_before_ms=0, started_ms=0,
                          deadline_ms=None, run_deadline_ms=None, priority=priority, phase=phase)

    ahead = Ahead()
    ahead.add([job("first1"), job("first2")], confirmed=1.0)
    ahead.add([job("next1", phase=UNDER_WAY), job("first3")], confirmed=1.1)
    ahead.add([job("urgent", priority=5), job("next2", phase=UNDER_WAY)], confirmed=1.2)
    taken = []
    while (queued := ahead.take(1.2)) is not None:
        taken.append(queued.job_id)
    assert taken == ["urgent", "next1", "next2", "first1", "first2", "first3"]


def test_a_worker_holding_a_job_for_its_time_records_on_the_recorders_thread(store, db_url):
    """A job claimed ahead, or held for its not-before time, is due to start on the
    loop: a recording there would hold its start up for a commit (a burst of delayed
    runs then waited for each other's recordings), so such a worker is not alone."""
    from ductline.store.records import ClaimedJob

    worker = build_worker(store, [APP], 2, load_settings(database_url=db_url, poll_interval=5))
    assert worker.outbox.alone()  # built, not run: no child, nothing claimed
    try:
        held = ClaimedJob(job_id="held", run_id="held", pipeline="p", step="s", scope="", input="[]", attempt=1,
                          lease_token="held", timeout_seconds=None, boundary=None, not_before_ms=1,
                          started_ms=0, deadline_ms=None, run_deadline_ms=None)
        worker.ahead.add_early([held], confirmed=0.0)
        assert not worker.outbox.alone()
        worker.ahead.drain()
        worker.ahead.add([held], 0.0)
        assert not worker.outbox.alone()
    finally:
        worker.ahead.drain()
