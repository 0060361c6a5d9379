"""Tasks sent ahead to a busy child (`ductline.execution.prefetch`), with a real
child process and the test as its parent: the child starts the next task as its
attempt ends and says when, in the same breath as the result; what the parent
took back is never started, whatever the child was doing; what the child started
first stays started; and a task sent while the step waits on a request does not
get in the way of the reply."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import wait_for

from ductline.execution import protocol
from ductline.execution.process import Child
from ductline.execution.protocol import Done, Ready, Request, Started, Task

APP = str(Path(__file__).resolve().parents[1] / "apps" / "prefetch_app.py")
PIPELINE = "prefetch_steps"
OFFSET_MS = 1_000_000.0  # the database clock minus the monotonic clock, as the parent measured it


def task(step: str, name: str) -> Task:
    return Task(f"job-{name}", "run-1", PIPELINE, step, 1, json.dumps([name]), None, f"lease-{name}", 1 << 20)


class Parent:
    """The test, as the child's parent: sends tasks and reads what comes back."""

    def __init__(self, marks: Path) -> None:
        self.marks = marks
        self.child = Child([APP], [])
        self.seen: list[object] = []
        assert isinstance(self.next(), Ready)

    def next(self, timeout: float = 60.0) -> object:
        end = time.monotonic() + timeout
        while not self.seen:
            assert time.monotonic() < end, "the child sent nothing"
            if self.child.conn.poll(0.05):
                self.seen.extend(self.child.reader.read(1 << 24))
        return self.seen.pop(0)

    def run(self, step: str, name: str) -> None:
        self.child.send(protocol.run(task(step, name)))

    def ahead(self, step: str, name: str, timeout_ms: int | None = None) -> None:
        self.child.sent_ahead += 1
        self.child.send(protocol.next_task(task(step, name), timeout_ms, OFFSET_MS, self.child.sent_ahead))

    def release(self, name: str) -> None:
        Path(f"{self.marks}.{name}").touch()

    def called(self) -> list[str]:
        return self.marks.read_text(encoding="utf-8").split() if self.marks.exists() else []

    def close(self) -> None:
        self.child.stop()
        self.child.join(30)


@pytest.fixture
def parent(tmp_path, monkeypatch):
    marks = tmp_path / "marks.txt"
    monkeypatch.setenv("PREFETCH_MARKS", str(marks))
    parent = Parent(marks)
    yield parent
    parent.close()


def test_the_task_sent_ahead_starts_as_the_attempt_ends_with_its_own_clock(parent):
    parent.run("held", "a")
    wait_for(lambda: parent.called() == ["a"])
    parent.ahead("deadline", "b", timeout_ms=5_000)
    before = time.monotonic()  # b waits behind a: its clock must not count the wait
    parent.release("a")
    assert parent.next() == Done("lease-a", '"a"')
    started = parent.next()
    assert isinstance(started, Started) and started.lease_token == "lease-b"
    assert started.at >= before  # when it started, not when it was sent
    done = parent.next()
    assert isinstance(done, Done) and done.lease_token == "lease-b"
    # Its deadline is the one the parent works out from the same instant (`protocol.next_task`).
    assert json.loads(done.output) == ["b", int(started.at * 1000 + OFFSET_MS) + 5_000]
    assert parent.called() == ["a", "b"]


def test_tasks_sent_ahead_in_one_write_start_in_order_each_with_its_own_clock(parent):
    parent.run("held", "a")
    wait_for(lambda: parent.called() == ["a"])
    first = parent.child.sent_ahead + 1
    parent.child.send_all([protocol.next_task(task("held", "b"), 5_000, OFFSET_MS, first),
                           protocol.next_task(task("deadline", "c"), 5_000, OFFSET_MS, first + 1)])
    parent.child.sent_ahead = first + 1
    parent.release("a")
    assert parent.next() == Done("lease-a", '"a"')
    started_b = parent.next()
    assert isinstance(started_b, Started) and started_b.lease_token == "lease-b"
    wait_for(lambda: parent.called() == ["a", "b"])
    parent.release("b")
    assert parent.next() == Done("lease-b", '"b"')
    started_c = parent.next()
    assert isinstance(started_c, Started) and started_c.lease_token == "lease-c"
    assert started_c.at > started_b.at  # c waited behind b: its clock starts at its own start
    done = parent.next()
    assert isinstance(done, Done) and done.lease_token == "lease-c"
    assert json.loads(done.output) == ["c", int(started_c.at * 1000 + OFFSET_MS) + 5_000]
    assert parent.called() == ["a", "b", "c"]


def test_what_the_parent_took_back_is_never_started(parent):
    parent.run("held", "a")
    wait_for(lambda: parent.called() == ["a"])
    parent.ahead("deadline", "b")
    parent.ahead("deadline", "c")
    # Taken back while the child is busy in a: nothing of it was started.
    assert parent.child.ledger.take_back(parent.child.sent_ahead) == 0
    parent.release("a")
    assert parent.next() == Done("lease-a", '"a"')
    parent.run("deadline", "d")  # the child serves on
    done = parent.next()
    assert isinstance(done, Done) and done.lease_token == "lease-d"
    assert parent.called() == ["a", "d"]


def test_a_task_the_child_started_first_stays_started(parent):
    parent.run("deadline", "a")
    parent.ahead("held", "b")
    wait_for(lambda: parent.called() == ["a", "b"])
    # The child started b before the parent tried: the ledger says so, and the
    # STARTED message is on its way.
    assert parent.child.ledger.take_back(parent.child.sent_ahead) == 1
    assert isinstance(parent.next(), Done)
    started = parent.next()
    assert isinstance(started, Started) and started.lease_token == "lease-b"
    parent.release("b")
    assert parent.next() == Done("lease-b", '"b"')


def test_a_task_sent_during_a_request_waits_for_the_reply(parent):
    parent.run("asks", "a")
    request = parent.next()
    assert isinstance(request, Request) and (request.kind, request.args) == ("context_get", ("answer",))
    parent.ahead("deadline", "b")  # before the reply: the child holds it
    parent.child.send(protocol.reply('"forty-two"', request.seq))
    assert parent.next() == Done("lease-a", '"forty-two"')
    started = parent.next()
    assert isinstance(started, Started) and started.lease_token == "lease-b"
    done = parent.next()
    assert isinstance(done, Done) and done.lease_token == "lease-b"
    assert parent.called() == ["a", "b"]


def test_an_answer_given_up_on_never_answers_a_later_request(parent):
    """A step whose wait for an answer a signal ended asks again: the late answer to
    the first request is dropped (replies carry their request's number)."""
    parent.child.send(protocol.run(Task("job-a", "run-1", "prefetch_impatient", "asks_impatiently", 1,
                                        json.dumps(["a"]), None, "lease-a", 1 << 20)))
    first = parent.next()
    assert isinstance(first, Request) and first.args == ("answer",)
    second = parent.next()  # asked only once the step gave up on the first (the test never answered it)
    assert isinstance(second, Request) and second.args == ("absent",) and second.seq != first.seq
    parent.child.send(protocol.reply('"forty-two"', first.seq))  # the late answer
    parent.child.send(protocol.reply(None, second.seq))
    assert parent.next() == Done("lease-a", "null")


def test_a_step_that_closes_the_ledger_still_gets_its_result_through(parent):
    """Whatever a step does to the ledger's descriptor, its own result reaches the
    parent, saying the child must be retired; the task sent ahead is not started there."""
    parent.child.send(protocol.run(Task("job-a", "run-1", "prefetch_closing", "closes_ledger", 1, json.dumps(["a"]),
                                        None, "lease-a", 1 << 20)))
    parent.ahead("deadline", "b")
    done = parent.next()
    assert isinstance(done, Done) and done.lease_token == "lease-a" and done.output == '"a"'
    assert "ledger of tasks sent ahead was closed" in done.retire
    assert "b" not in parent.called()


def test_a_child_being_killed_starts_nothing_sent_ahead(parent):
    """The enforcer takes back what was sent ahead before its SIGTERM: a step that ends
    on the SIGTERM (within the kill's grace) leaves its child idle, not running the
    next task while it waits for the SIGKILL."""
    from ductline.execution.enforcer import Enforcer, Reason
    from ductline.execution.protocol import Failed

    enforcer = Enforcer(30.0, lambda: None)
    enforcer.start()
    try:
        parent.child.send(protocol.run(Task("job-a", "run-1", "prefetch_cleaning", "graceful", 1,
                                            json.dumps(["a"]), None, "lease-a", 1 << 20)))
        enforcer.watch(0, parent.child, None)
        wait_for(lambda: parent.called() == ["a"])
        parent.ahead("deadline", "b")
        enforcer.kill(0, Reason.TIMEOUT)
        failed = parent.next()
        assert isinstance(failed, Failed) and failed.lease_token == "lease-a"
        parent.run("deadline", "c")  # the child is idle: it serves what comes next, not b
        done = parent.next()
        assert isinstance(done, Done) and done.lease_token == "lease-c", done
        assert parent.called() == ["a", "c"]
    finally:
        enforcer.stop()
