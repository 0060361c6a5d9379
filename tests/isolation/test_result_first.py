"""A task with ``result_first`` (what a worker sends): the child sends the attempt's
result before it restores its process state, so the parent can record it meanwhile;
a task sent after that result waits in the channel until the child is clean, and a
child that cannot restore says RETIRE and never starts it. A real child process,
with the test as its parent."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ductline.execution import protocol
from ductline.execution.process import Child
from ductline.execution.protocol import Done, Ready, Retire, Task

APP = str(Path(__file__).resolve().parents[1] / "apps" / "prefetch_app.py")


def task(pipeline: str, step: str, name: str, *, result_first: bool = True) -> Task:
    return Task(f"job-{name}", "run-1", pipeline, step, 1, json.dumps([name]), None, f"lease-{name}", 1 << 20,
                result_first=result_first)


class Parent:
    def __init__(self, marks: Path) -> None:
        self.marks = marks
        self.child = Child([APP], [])
        self.seen: list[object] = []
        assert isinstance(self.next(), Ready)

    def next(self) -> object:
        while not self.seen:
            assert self.child.conn.poll(60), "the child sent nothing"
            self.seen.extend(self.child.reader.read(1 << 24))
        return self.seen.pop(0)

    def called(self) -> list[str]:
        return self.marks.read_text(encoding="utf-8").split() if self.marks.exists() else []

    def stop(self) -> None:
        self.child.stop()
        self.child.join(30)


@pytest.fixture
def parent(tmp_path, monkeypatch):
    marks = tmp_path / "marks.txt"
    monkeypatch.setenv("PREFETCH_MARKS", str(marks))
    parent = Parent(marks)
    yield parent
    for name in ("a", "b"):
        Path(f"{marks}.{name}").touch()  # let lingering threads end
    parent.stop()


def test_a_clean_child_runs_the_task_sent_right_after_the_result(parent):
    (parent.marks.parent / "marks.txt.a").touch()
    parent.child.send(protocol.run(task("prefetch_steps", "held", "a")))
    assert parent.next() == Done("lease-a", '"a"')
    parent.child.send(protocol.run(task("prefetch_steps", "deadline", "b")))  # while it restores
    assert parent.next() == Done("lease-b", '["b",null]')
    assert parent.called() == ["a", "b"]


def test_a_child_that_cannot_restore_says_so_after_its_result_and_starts_nothing_sent_after_it(parent):
    parent.child.send(protocol.run(task("prefetch_leaving", "leaves_thread", "a")))
    assert parent.next() == Done("lease-a", '"a"')  # sent before the restore found the thread
    parent.child.send(protocol.run(task("prefetch_leaving", "held", "b")))  # sent after that result
    retire = parent.next()
    assert isinstance(retire, Retire) and "thread(s) still running" in retire.reason
    Path(f"{parent.marks}.b").touch()  # "b" would return at once, if it ever started
    parent.stop()  # a retiring child reads nothing but STOP
    assert parent.child.process.returncode == 0
    assert parent.called() == ["a"]


def test_without_result_first_the_result_says_whether_the_child_restored(parent):
    parent.child.send(protocol.run(dataclasses.replace(task("prefetch_leaving", "leaves_thread", "a"),
                                                       result_first=False)))
    done = parent.next()
    assert isinstance(done, Done) and done.output == '"a"' and "thread(s) still running" in done.retire
