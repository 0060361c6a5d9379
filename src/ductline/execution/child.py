"""The killable child: a process that runs one attempt at a time for its parent.

The child is its own process group leader (``setsid``), so the parent can kill it
and everything it started with one ``killpg``, even while it is stuck in C code or
in a syscall. The child never touches the database: it receives a `Task`, runs the
step, and sends back the JSON output or the error (`ductline.execution.protocol`).
Requests that need the database (context values, boundary crossings, chunks of
out-of-line input) go to the parent, which answers after commit.

`run_step` is also what a thread-isolated attempt runs, over a pipe instead of a
socket, so a step behaves the same wherever it runs.
"""

from __future__ import annotations

import ctypes
import fcntl
import inspect
import itertools
import json
import os
import resource
import signal
import sys
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable

from ductline import codec
from ductline import step_context as context
from ductline.errors import ExecutionError
from ductline.execution import cleanstate, guardian, protocol, rlimits, steplog
from ductline.execution.prefetch import Inbox, Ledger
from ductline.execution.protocol import Kind, Task
from ductline.execution.watchdog import Horizon, Watchdog
from ductline.model import payloads

PR_SET_PDEATHSIG = 1

# What the parent's `ductline.execution.process.Child` puts in the environment.
ENV_FD = "DUCTLINE_CHILD_FD"
ENV_PARENT = "DUCTLINE_CHILD_PARENT"
ENV_APPS = "DUCTLINE_CHILD_APPS"
ENV_PATH = "DUCTLINE_CHILD_PATH"
ENV_HORIZON = "DUCTLINE_CHILD_HORIZON_FD"
ENV_LEDGER = "DUCTLINE_CHILD_LEDGER_FD"


def describe(exc: BaseException) -> tuple[str, str, str]:
    """``(error_type, message, traceback)``, rendered here in the child so the parent
    never calls the step's code: a ``__str__`` that raises or returns something
    other than text becomes ``<exception str() raised ValueError>``, and text the
    database cannot hold (NUL, lone surrogates) is escaped (`ductline.codec.safe_text`)."""
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return codec.clean_text(str(name)), _render(exc), _render_traceback(exc)


def _render(exc: BaseException) -> str:
    try:
        text = str(exc)
        if type(text) is not str:
            raise TypeError(f"__str__ returned {type(text).__name__}")
    except BaseException as failure:  # noqa: BLE001 - the step's exception, any behaviour
        return f"<exception str() raised {type(failure).__name__}>"
    return codec.clean_text(text)


def _render_traceback(exc: BaseException) -> str:
    try:
        return codec.clean_text("".join(traceback.format_exception(exc)))
    except BaseException as failure:  # noqa: BLE001 - format_exception calls the step's __str__/__repr__
        return f"<traceback could not be rendered: {type(failure).__name__}>"


# Numbers a child's requests (across its attempts): a reply names the one it answers.
_REQUESTS = itertools.count(1)


def run_step(conn: Connection, task: Task, restore: Callable[[], str] | None = None,
             inbox: Inbox | None = None) -> tuple[Task | None, bool]:
    """Run one attempt and send its result on ``conn`` (its own requests go there too).

    Args:
        restore: called after the step and before its result is sent (a reused
            child puts its process state back); returns why the child cannot run
            another attempt, or ``""``. Sent with the result.
        inbox: a child's messages from its parent (`ductline.execution.prefetch`):
            replies to requests are read through it, and a task sent ahead is
            started as this attempt ends, said in the same write as the result.

    Returns:
        The task started next (sent ahead), if any, and whether the child must run
        no other attempt (it could not restore its state, or the step is ``fresh``).
    """
    from ductline.dsl.pipeline import registered
    from ductline.dsl.steps import invoke
    from ductline.dsl.timeouts import ScaledTimeout
    from ductline.observability.tracing import attempt_context

    lock = threading.Lock()  # log batches may be sent from other threads of the step

    def send(message: tuple[Any, ...]) -> None:
        data = protocol.dumps(message)
        with lock:
            conn.send_bytes(data)

    def finish(result: tuple[Any, ...], retire: str) -> tuple[Task | None, bool]:
        if retire or inbox is None:
            send(result)
            return None, bool(retire)
        following, said = inbox.take_next()
        if said is None:
            send(result)
            return None, False
        data = protocol.frame(protocol.dumps(result)) + protocol.frame(protocol.dumps(said))
        with lock:
            _write_all(conn.fileno(), data)
        return following, False

    def conclude(result: Callable[[str], tuple[Any, ...]]) -> tuple[Task | None, bool]:
        """Send the attempt's result (``result(why the child retires)``) and restore."""
        if _result_first(task, restore, inbox):
            # Sent before the restore: its parent records it meanwhile, and the next
            # task it sends waits in the channel until this process is clean.
            send(result(""))
            why = _retire(task, restore)
            if why:
                send(protocol.retire(why))
            return None, bool(why)
        retire = _retire(task, restore)
        return finish(result(retire), retire)

    def request(kind: str, args: tuple[Any, ...]) -> Any:
        seq = next(_REQUESTS)
        send(protocol.request(kind, args, seq))
        while True:
            message = conn.recv() if inbox is None else inbox.reply()
            if message[0] in (Kind.REPLY, Kind.REPLY_ERROR) and message[2] == seq:
                break
            # the answer to a request whose wait a signal ended (in this attempt or one
            # before on this child): never this request's answer
        if message[0] == Kind.REPLY_ERROR:
            raise ExecutionError(message[1])
        return message[1]

    step_context = context.StepContext(
        run_id=task.run_id, job_id=task.job_id, step=task.step, attempt=task.attempt,
        deadline=context.utc_from_ms(task.deadline_ms), _request=request,
    )
    context.activate(step_context)
    try:
        definition = registered(task.pipeline).definition()
        try:
            node = definition.node(task.step)
        except KeyError:
            raise LookupError(
                f"step {task.step!r} is not in pipeline {task.pipeline!r} as this worker loaded it "
                "(renamed or removed by a deploy?); deploy a definition that has it, or cancel the run"
            ) from None
        # Out-of-line values in the input are read chunk by chunk through the parent.
        args = codec.loads(payloads.resolve(task.input, lambda pid, seq: request("payload_chunk", (pid, seq))))
        if isinstance(node.options.timeout, ScaledTimeout):
            # Sized here, under the floor deadline: a size function that hangs is killed too.
            # The answer is the attempt's new deadline (epoch ms), what the step sees.
            step_context.deadline = context.utc_from_ms(
                request("timeout", (node.options.timeout.seconds_for(tuple(args)),)))
        capture = steplog.Capture(lambda batch: send(protocol.log(task.lease_token, [r.wire() for r in batch])),
                                  node.options.log_level or task.log_level, task.log_max_bytes)
        # In a child (one attempt at a time, on its main thread) the step's own threads are captured too.
        with steplog.activate(capture, process_wide=threading.current_thread() is threading.main_thread()), \
                attempt_context(task.run_id, task.job_id, task.attempt):  # user spans nest under the attempt
            with rlimits.applied(task.memory_limit, task.cpu_limit):
                result = invoke(node.func, tuple(args), task.step)
                if inspect.isawaitable(result):
                    import asyncio  # here: most children never run a coroutine step

                    result = asyncio.run(_awaited(result))
        output = codec.dumps(result, what=f"output of step {task.step!r}")
        payloads.check_size(output, f"output of step {task.step!r}", task.max_output_bytes)
        # A divert routes on str(output): rendered here, where the step's types live (the
        # parent never builds a user value).
        route_key = codec.render(result, "route key") if _diverts(node) else ""
    except BaseException as exc:  # the step's failure is data for the parent
        context.activate(None)
        described = describe(exc)
        del exc  # the traceback's frames hold the step's objects: drop them before restoring
        return conclude(lambda retire: protocol.failed(task.lease_token, *described, retire))
    context.activate(None)
    return conclude(lambda retire: protocol.done(task.lease_token, output, retire, route_key))


def _diverts(node: Any) -> bool:
    transition = getattr(node, "next", None)
    return transition is not None and getattr(transition.kind, "value", None) == "divert"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _result_first(task: Task, restore: Callable[[], str] | None, inbox: Inbox | None) -> bool:
    """Whether the result goes out before the restore (`Task.result_first`): not when
    the child retires whatever the restore finds (limits, ``fresh``), nor when a task
    sent ahead waits, which starts as the attempt ends, its STARTED in the same write
    as the result (`finish`)."""
    return (task.result_first and restore is not None and inbox is not None and not task.fresh
            and not rlimits.limited(task.memory_limit, task.cpu_limit) and not inbox.holds_next())


def _retire(task: Task, restore: Callable[[], str] | None) -> str:
    if rlimits.limited(task.memory_limit, task.cpu_limit):
        # Its hard limits and dropped capability stay: restoring the rest would only
        # report them as not restored.
        return "; ".join(filter(None, ["isolation='fresh'" if task.fresh else "", rlimits.RETIRE_REASON]))
    why = "" if restore is None else restore()
    if task.fresh:
        why = "; ".join(filter(None, ["isolation='fresh'", why]))
    return why


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def main() -> None:
    """Entry point of a child process (see `ductline.execution.process.Child`)."""
    _die_with_parent(int(os.environ.pop(ENV_PARENT)))
    guardian.start()  # first: before any thread, and before the apps are imported
    conn = Connection(out_of_the_way(int(os.environ.pop(ENV_FD))))
    apps = json.loads(os.environ.pop(ENV_APPS))
    sys_path = json.loads(os.environ.pop(ENV_PATH))
    horizon_fd = os.environ.pop(ENV_HORIZON, None)
    ledger_fd = os.environ.pop(ENV_LEDGER, None)
    child_main(conn, apps, sys_path, None if horizon_fd is None else Horizon(out_of_the_way(int(horizon_fd))),
               None if ledger_fd is None else Ledger(out_of_the_way(int(ledger_fd))))


# How far below the soft RLIMIT_NOFILE (or 1024, if lower) the channel is moved.
_HIGH_FD_MARGIN = 64


def out_of_the_way(fd: int) -> int:
    """``fd`` moved to a high descriptor number, closed on exec (the lowest free one
    from 64 below the descriptor limit, or below 1024): a step that writes to a low
    descriptor it guesses (3, 4, ...), or runs a program, does not write into the
    channel with its parent, or into what the parent shares with the child."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = 1024 if soft == resource.RLIM_INFINITY else min(soft, 1024)
    try:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, max(3, ceiling - _HIGH_FD_MARGIN))
    except OSError:  # no free descriptor up there: keep it where it is
        return fd
    os.close(fd)
    return moved


def _die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this child when its parent dies (even by SIGKILL), so an
    orphaned attempt cannot overlap the re-run of its job elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the lease still fences results
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def child_main(conn: Connection, apps: list[str], sys_path: list[str], horizon: Horizon | None = None,
               ledger: Ledger | None = None) -> None:
    """Serve tasks until the parent says stop or goes away. The process already
    leads its own process group, so killpg(pid) reaches grandchildren too.
    ``horizon``, if given, is the lease horizon its parent writes: past it, an
    attempt's process group is stopped by the child itself (`Watchdog`).
    ``ledger``, if given, is shared with the parent for the tasks it sends ahead
    (`ductline.execution.prefetch`); without one, none is ever started."""
    watchdog = None if horizon is None else Watchdog(horizon)
    if watchdog is not None:
        watchdog.start()  # before the snapshot: its thread belongs to the baseline
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; Ctrl-C is its
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    cleanstate.become_subreaper()
    for folder in reversed(sys_path):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        from ductline.apps import import_app

        for spec in apps:
            import_app(spec)  # a run started at the app's top level is refused meanwhile
        import ductline.observability.tracing  # noqa: F401  (warm: the first task must not pay for it)
        import ductline.dsl.steps  # noqa: F401
        import ductline.dsl.timeouts  # noqa: F401
        # Taken once the apps are imported: what they set up is the baseline each
        # attempt is returned to.
        snapshot = cleanstate.Snapshot.take()
        # Only a ready child gets a job, so an attempt's clock never counts our start-up.
        conn.send(protocol.ready(os.getpid()))
    except BaseException as exc:
        conn.send(protocol.fatal(*describe(exc)))
        return

    def restore() -> str:
        reasons = snapshot.restore()
        if ledger is not None and not ledger.intact():  # it could not take tasks sent ahead any more
            reasons.append("the descriptor of its ledger of tasks sent ahead was closed or replaced")
        return "; ".join(reasons)

    try:
        _serve(conn, restore, Inbox(conn, ledger), watchdog)
    finally:
        # Stopped or left by its parent before the parent killed what an attempt
        # left running (it learns of it only after the result): gone with this child.
        snapshot.end_leftovers()


def _serve(conn: Connection, restore: Callable[[], str], inbox: Inbox, watchdog: Watchdog | None) -> None:
    """Run the tasks the parent sends until it says stop or goes away."""
    task: Task | None = None
    retiring = False  # it could not restore its state: it waits for its parent to kill it
    while True:
        if task is None:
            try:
                message = inbox.recv()
            except (EOFError, OSError):
                return
            if message[0] == Kind.STOP:
                return
            if retiring:
                continue
            if message[0] == Kind.RUN:
                task = message[1]
            elif message[0] == Kind.NEXT:  # sent ahead, but this child was idle by then
                task, said = inbox.start(message)
                if task is None or said is None:
                    continue  # taken back
                conn.send_bytes(protocol.dumps(said))
            else:
                continue
        if watchdog is not None:
            watchdog.running = True
        try:
            task, retiring = run_step(conn, task, restore, inbox)
        finally:
            if watchdog is not None:
                watchdog.running = False
