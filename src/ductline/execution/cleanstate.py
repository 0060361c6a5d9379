"""A reused child's process state, snapshotted when it is ready and restored after
every attempt, so nothing an attempt did to its process reaches the next one.

Restored: the environment (``os.environ``), the working directory, the umask,
every signal's Python-level disposition and the main thread's signal mask (a
signal the attempt blocked and left pending is discarded, not delivered), the
interval timers (a pending ``signal.alarm`` would otherwise kill a later attempt),
every resource limit, the scheduling priority (``os.nice``) and policy, the CPU
affinity, the parent-death signal and the dumpable flag, and the C library's time
zone (``time.tzset`` after the environment), and the interpreter's process-wide limits
(the recursion limit, the longest integer converted to text, the thread switch
interval). Checked, since they cannot be undone from inside: threads
still running (counted in ``/proc/self/task``, so native threads count too),
processes the attempt started that are still alive (the child is a subreaper, so
orphaned grandchildren are reparented to it and found too), C-level signal
dispositions (``SigIgn``/``SigCgt`` of ``/proc/self/status``), a lowered hard
resource limit, a raised priority that this user may not lower back, user and group
ids, ``no_new_privs``, a seccomp filter, namespaces (``unshare``, ``setns``). A child
that cannot restore says so with its result and its
parent retires it: its whole process group is killed and a fresh spare takes its
place.

Module globals and imported modules are *not* reset: a step that caches in a
global sees the cache in its next attempt on the same child. Steps that must not
share even that use ``isolation="fresh"``.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from ductline.execution.descendants import Below

PR_SET_CHILD_SUBREAPER = 36

_UNCATCHABLE = {signal.SIGKILL, signal.SIGSTOP}
# The handler table and the signal sets without `signal`'s conversion to enums: restore
# reads every signal's handler after each attempt, and the conversion was most of its cost.
_raw_signal = getattr(signal, "_signal", signal)
_raw_getsignal = _raw_signal.getsignal
_RLIMITS = sorted({getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_")})
_TIMERS = (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)
# Lines of /proc/self/status compared after each attempt (one read serves them all).
# The signal masks show handlers installed from C; the rest cannot be undone from
# inside the process, except the affinity, which restore() sets back first.
_STATUS_KEYS = ("SigIgn", "SigCgt", "Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
                "NoNewPrivs", "Seccomp", "Cpus_allowed_list")
_STATUS_PROBLEMS = {"SigIgn": "signal dispositions changed outside Python",
                    "SigCgt": "signal dispositions changed outside Python",
                    "Uid": "user ids changed", "Gid": "group ids changed", "Groups": "supplementary groups changed",
                    **dict.fromkeys(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), "capabilities changed"),
                    "NoNewPrivs": "no_new_privs was set", "Seccomp": "a seccomp filter was installed",
                    "Cpus_allowed_list": "CPU affinity not restored"}
_STATUS_MARKERS = tuple((key, b"\n" + key.encode() + b":") for key in _STATUS_KEYS)  # none is the first line
_NAMESPACES = ("net", "mnt", "uts", "ipc", "user", "pid_for_children", "cgroup")
PR_SET_PDEATHSIG, PR_GET_PDEATHSIG, PR_GET_DUMPABLE, PR_SET_DUMPABLE = 1, 2, 3, 4
PR_GET_CHILD_SUBREAPER = 37


def become_subreaper() -> None:
    """Have orphaned descendants reparented to this process (Linux), so a grandchild
    whose parent exited is still found among this process's children."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: leftovers are then found only as direct children
        pass


@dataclass(slots=True)
class Snapshot:
    """The process state of a ready child, before its first attempt."""

    environ: dict[str, str]
    environ_data: dict[Any, Any]  # `_environ_data()`: compared without decoding every entry
    cwd: str
    umask: int
    handlers: dict[int, Any]
    mask: set[int]
    limits: dict[int, tuple[int, int]]
    idle_timers: list[int]
    threads: int
    nice: int
    scheduler: tuple[int, int]  # policy, priority
    affinity: set[int]
    process_flags: tuple[int, int, int]  # parent-death signal, dumpable, child subreaper
    namespaces: dict[str, str]
    interpreter: tuple[int, int, float]  # `_interpreter()`
    kernel_view: dict[str, str] = field(default_factory=dict)  # `_STATUS_KEYS` of /proc/self/status
    children: set[str] = field(default_factory=set)  # already there when ready (the child's guardian)

    @classmethod
    def take(cls) -> "Snapshot":
        umask = os.umask(0)
        os.umask(umask)
        handlers: dict[int, Any] = {}
        for sig in signal.valid_signals():
            if sig in _UNCATCHABLE:
                continue
            try:
                handler = _raw_getsignal(sig)
            except (ValueError, OSError):
                continue
            if handler is not None:  # None: installed outside Python; checked via /proc instead
                handlers[sig] = handler
        return cls(
            environ=dict(os.environ), environ_data=_environ_data(), cwd=os.getcwd(), umask=umask,
            handlers=handlers,
            mask=set(_raw_signal.pthread_sigmask(signal.SIG_BLOCK, [])),
            limits={r: resource.getrlimit(r) for r in _RLIMITS},
            idle_timers=[t for t in _TIMERS if signal.getitimer(t) == (0.0, 0.0)],
            threads=_thread_count(), nice=os.getpriority(os.PRIO_PROCESS, 0), scheduler=_scheduler(),
            affinity=os.sched_getaffinity(0), process_flags=_process_flags(), namespaces=_namespaces(),
            interpreter=_interpreter(),
            kernel_view=_kernel_view(), children=set(_children(_tasks())),
        )

    def end_leftovers(self) -> None:
        """Kill with SIGKILL every process below this one that was not there when the
        snapshot was taken, and all below those (also what left its process group).

        Called as a child exits: an attempt's leftover its parent has not killed yet
        (the report of it comes after the result, and a stop may come first) would
        otherwise be reparented to PID 1 and outlive the worker."""
        below = Below()
        try:
            for pid in map(int, _children(_tasks())):
                if str(pid) in self.children:
                    continue
                below.signal(pid, signal.SIGKILL)
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        finally:
            below.close()

    def restore(self) -> list[str]:
        """Put the process back as it was; returns what could not be restored (an
        empty list: the child is clean and may run another attempt)."""
        problems: list[str] = []
        if _environ_data() != self.environ_data:
            os.environ.clear()
            os.environ.update(self.environ)
            time.tzset()  # the C library keeps the zone TZ named when tzset() last ran
        try:
            if os.getcwd() != self.cwd:
                os.chdir(self.cwd)
        except OSError as exc:
            problems.append(f"working directory not restored ({exc})")
        os.umask(self.umask)
        for sig, handler in self.handlers.items():
            try:
                if _raw_getsignal(sig) is not handler:
                    signal.signal(sig, handler)
            except (ValueError, OSError, TypeError) as exc:
                problems.append(f"signal {sig} not restored ({exc})")
        # A signal the attempt blocked and that is still pending belongs to the
        # attempt: unblocking it would deliver it now, after the step returned (a
        # default disposition kills the child before it sends the result).
        for sig in _raw_signal.sigpending() - self.mask:
            while signal.sigtimedwait([sig], 0) is not None:
                pass  # a real-time signal queues every instance sent: all of them go
        _raw_signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
        # Only timers the attempt started are cancelled: one the apps set up at import
        # keeps counting down, as it would in a fresh child.
        for timer in self.idle_timers:
            if signal.getitimer(timer) != (0.0, 0.0):
                signal.setitimer(timer, 0)
        for which, wanted in self.limits.items():
            if resource.getrlimit(which) != wanted:
                try:
                    resource.setrlimit(which, wanted)
                except (ValueError, OSError) as exc:  # a lowered hard limit cannot be raised again
                    problems.append(f"resource limit {which} not restored ({exc})")
        # Per thread on Linux: steps run in the main thread, which restores.
        if os.getpriority(os.PRIO_PROCESS, 0) != self.nice:
            try:
                os.setpriority(os.PRIO_PROCESS, 0, self.nice)
            except OSError as exc:  # a niceness raised by the attempt needs privileges to lower
                problems.append(f"scheduling priority not restored ({exc})")
        if _scheduler() != self.scheduler:
            try:
                os.sched_setscheduler(0, self.scheduler[0], os.sched_param(self.scheduler[1]))
            except OSError as exc:
                problems.append(f"scheduling policy not restored ({exc})")
        if _process_flags() != self.process_flags:
            _set_process_flags(self.process_flags)
        if _interpreter() != self.interpreter:
            recursion, digits, switch = self.interpreter
            sys.setrecursionlimit(recursion)
            sys.set_int_max_str_digits(digits)
            sys.setswitchinterval(switch)
        view = _kernel_view()
        if view.get("Cpus_allowed_list") != self.kernel_view.get("Cpus_allowed_list"):
            try:
                os.sched_setaffinity(0, self.affinity)
            except OSError:
                pass  # reported below: the view still differs
            view = _kernel_view()
        problems.extend(sorted({_STATUS_PROBLEMS[k] for k in _STATUS_KEYS if view.get(k) != self.kernel_view.get(k)}))
        if _namespaces() != self.namespaces:
            problems.append("namespaces changed")
        # Listed every time, even with as many threads as when ready: a thread of the
        # baseline may have ended and one of the attempt's run in its place, and the
        # processes it started are found only under its own id.
        tasks = _tasks()
        problems.extend(_leftover_processes(tasks, self.children))
        threads = len(tasks) if tasks else _thread_count()
        if threads > self.threads:
            threads = _settled_thread_count(self.threads)
        if threads > self.threads:
            problems.append(f"{threads - self.threads} thread(s) still running")
        return problems


def _interpreter() -> tuple[int, int, float]:
    """The interpreter's process-wide limits a step may change with ``sys``: the
    recursion limit, the longest integer converted to text (JSON output of a later
    attempt would fail on it), the thread switch interval."""
    return sys.getrecursionlimit(), sys.get_int_max_str_digits(), sys.getswitchinterval()


def _environ_data() -> dict[Any, Any]:
    """The environment as ``os.environ`` holds it (encoded), copied: comparing it costs
    no decoding of every variable (CPython keeps it in ``os.environ._data``)."""
    data = getattr(os.environ, "_data", None)
    return dict(data) if isinstance(data, dict) else dict(os.environ)


def _tasks() -> list[str]:
    """The thread ids of this process (native threads too); empty if unknown."""
    try:
        return os.listdir("/proc/self/task")
    except OSError:
        return []


# A thread that Python has joined may still be listed for a moment while the kernel
# ends it (join returns when its Python state is released, a little before the
# thread itself exits): an extra thread is looked for again for up to this long
# (seconds) before the child is retired for it.
EXITING_THREAD_SECONDS = 0.05


def _settled_thread_count(baseline: int) -> int:
    """The number of threads once those already ending have gone (at most
    `EXITING_THREAD_SECONDS`; only called when more than ``baseline`` are listed)."""
    give_up = time.monotonic() + EXITING_THREAD_SECONDS
    while True:
        count = _thread_count()
        if count <= baseline or time.monotonic() >= give_up:
            return count
        time.sleep(0.0005)


def _thread_count() -> int:
    tasks = _tasks()
    if tasks:
        return len(tasks)
    import threading

    return threading.active_count()


def _read(path: str) -> bytes:
    """A small /proc file in one read (no text layer: restore runs after every attempt)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


class _KeptOpen:
    """A /proc file of this process read again and again through one descriptor
    (opening it cost more than reading it). The descriptor is checked before each
    read: one an attempt closed or replaced is not trusted, the file is opened again,
    as it is in a forked process (``/proc/self`` named the parent when it was opened)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._fd = -1
        self._identity = (0, 0, 0)  # pid, device, inode

    def read(self) -> bytes:
        if self._fd >= 0:
            try:
                info = os.fstat(self._fd)
                if (os.getpid(), info.st_dev, info.st_ino) == self._identity:
                    return os.pread(self._fd, 65536, 0)
            except OSError:
                pass
        # Not closed here: the number may belong to whatever the attempt put there.
        self._fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
        info = os.fstat(self._fd)
        self._identity = (os.getpid(), info.st_dev, info.st_ino)
        return os.pread(self._fd, 65536, 0)


_status = _KeptOpen("/proc/self/status")


def _kernel_view() -> dict[str, str]:
    """`_STATUS_KEYS` as the kernel shows them: ignored and caught signals (handlers
    installed from C too), ids, no_new_privs, seccomp, CPU affinity."""
    try:
        status = _status.read()
    except OSError:
        return {}
    view: dict[str, str] = {}
    for key, marker in _STATUS_MARKERS:  # a find per key: a pattern over every line cost more than the read
        start = status.find(marker)
        if start < 0:
            continue
        start += len(marker)
        end = status.find(b"\n", start)
        view[key] = status[start:None if end < 0 else end].strip().decode()
    return view


def _children(tasks: list[str]) -> list[str]:
    """The pids of this process's children; ``tasks``: its thread ids (each thread's
    children are listed apart)."""
    found: list[str] = []
    for tid in tasks:
        try:
            found.extend(_read(f"/proc/self/task/{tid}/children").decode().split())
        except OSError:
            continue
    return found


def _leftover_processes(tasks: list[str], known: set[str]) -> list[str]:
    """Processes this child started that are still alive (zombies are reaped first),
    other than ``known`` ones; ``tasks``: this process's thread ids."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    return [f"process {pid} started by the attempt is still running" for pid in _children(tasks) if pid not in known]


def _scheduler() -> tuple[int, int]:
    return os.sched_getscheduler(0), os.sched_getparam(0).sched_priority


_libc: Any = None


def _prctl() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc.prctl


def _process_flags() -> tuple[int, int, int]:
    """The parent-death signal (a child dies with its parent by it), the dumpable
    flag and the child-subreaper flag (without it, a process the next attempt starts
    and orphans is not found as a leftover); ``(0, 0, 0)`` where prctl is missing."""
    try:
        prctl = _prctl()
    except (OSError, AttributeError):
        return 0, 0, 0
    deathsig, subreaper = ctypes.c_int(0), ctypes.c_int(0)
    prctl(PR_GET_PDEATHSIG, ctypes.byref(deathsig), 0, 0, 0)
    prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(subreaper), 0, 0, 0)
    return deathsig.value, int(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)), subreaper.value


def _set_process_flags(flags: tuple[int, int, int]) -> None:
    prctl = _prctl()
    prctl(PR_SET_PDEATHSIG, flags[0], 0, 0, 0)
    prctl(PR_SET_DUMPABLE, flags[1], 0, 0, 0)
    prctl(PR_SET_CHILD_SUBREAPER, flags[2], 0, 0, 0)


def _namespaces() -> dict[str, str]:
    """The namespaces this process is in (``/proc/self/ns``), by name."""
    global _ns_dir
    if _ns_dir is None:
        try:
            # Kept open: each name is then read relative to it, without resolving
            # /proc/self again (restore reads them all after every attempt).
            fd = os.open("/proc/self/ns", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return {}
        info = os.fstat(fd)
        _ns_dir = (fd, info.st_dev, info.st_ino)
    fd, dev, ino = _ns_dir
    try:
        # An attempt that closed the descriptor, or put another directory (another
        # process's namespaces) in its place, must not hide a change: the view is
        # then empty, it differs from the snapshot, and the child retires.
        info = os.fstat(fd)
    except OSError:
        return {}
    if (info.st_dev, info.st_ino) != (dev, ino):
        return {}
    found: dict[str, str] = {}
    for name in _NAMESPACES:
        try:
            found[name] = os.readlink(name, dir_fd=fd)
        except OSError:
            continue
    return found


_ns_dir: tuple[int, int, int] | None = None  # descriptor of /proc/self/ns, and its device and inode
