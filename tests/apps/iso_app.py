"""Pipelines for the clean-state tests: a step pollutes its process one way, the
next step (on the same slot) reports what it finds (tests/isolation)."""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG, PR_GET_PDEATHSIG, PR_GET_DUMPABLE, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 2, 3, 4, 38
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER, PR_CAPBSET_DROP, CAP_DAC_OVERRIDE = 36, 37, 24, 1
CLONE_NEWNET = 0x40000000

from ductline import Pipeline

MARKER = "DUCTLINE_ISO_LEFTOVER"


def _ignore(signum, frame):  # a Python-level handler a step leaves behind
    pass


# A thread the app starts at import: part of every child's baseline ("thread_swap" ends it).
_baseline_stop = threading.Event()
_baseline_thread = threading.Thread(target=_baseline_stop.wait, daemon=True, name="iso-baseline")
_baseline_thread.start()


def _swap_baseline_thread():
    """End the baseline's thread and run, in a new thread that keeps running in its
    place (as many threads as before), a process; returns its pid."""
    _baseline_stop.set()
    _baseline_thread.join()
    started = []

    def spawn():
        process = subprocess.Popen(["sleep", "3600"])
        started.append(process.pid)
        process.wait()

    threading.Thread(target=spawn, daemon=True).start()
    while not started:
        time.sleep(0.01)
    return started[0]


def _pollute(kind):
    if kind == "env":
        os.environ[MARKER] = "1"
    elif kind == "cwd":
        os.chdir(tempfile.gettempdir())
    elif kind == "signals":
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, _ignore)
        signal.signal(signal.SIGHUP, _ignore)
    elif kind == "sigmask":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2, signal.SIGTERM})
    elif kind == "pending":  # a blocked signal still pending when the step returns
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)  # to this thread, which blocks it
    elif kind == "umask":
        os.umask(0o077)
    elif kind == "rlimit":
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    elif kind == "timer":  # a pending SIGALRM would kill a later attempt on this child
        signal.setitimer(signal.ITIMER_REAL, 3600)
    elif kind == "nice":
        os.nice(5)
    elif kind == "affinity":
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    elif kind == "tz":  # the C library's zone, not only the environment
        os.environ["TZ"] = "Asia/Tokyo"
        time.tzset()
    elif kind == "interpreter":  # process-wide limits of the interpreter
        sys.setrecursionlimit(200)
        sys.set_int_max_str_digits(640)
        sys.setswitchinterval(0.05)
    elif kind == "pdeathsig":  # the child would no longer die with its worker
        _libc.prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
    elif kind == "dumpable":
        _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    elif kind == "subreaper":  # orphans of a later attempt would go to init, unseen
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    elif kind == "rt_queued":  # a real-time signal queues each instance: all must go
        rt = signal.SIGRTMIN + 2
        signal.pthread_sigmask(signal.SIG_BLOCK, {rt})
        for _ in range(3):
            signal.pthread_kill(threading.get_ident(), rt)
    elif kind == "capbnd":  # needs CAP_SETPCAP; a capability dropped from the bounding set never comes back
        if _libc.prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP")
    elif kind == "sched":
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    elif kind == "no_new_privs":  # cannot be unset: the child is retired
        _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    elif kind == "euid":  # root only: other pipelines would run as nobody
        os.setegid(65534)
        os.seteuid(65534)
    elif kind == "netns":  # needs CAP_SYS_ADMIN: the next attempt would have no network
        if _libc.unshare(CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
    elif kind == "rlimit_hard":  # cannot be raised again without privileges: the child is retired
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    elif kind == "thread":
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    elif kind == "process":
        subprocess.Popen(["sleep", "3600"])
    elif kind == "orphan":  # a grandchild whose parent exits at once
        subprocess.run(["sh", "-c", "sleep 3600 &"], check=True)
    elif kind == "session":  # a process outside the child's process group
        return subprocess.Popen(["sleep", "3600"], start_new_session=True).pid
    elif kind == "thread_swap":  # the process of a thread that took a baseline thread's place
        return _swap_baseline_thread()
    elif kind != "none":
        raise ValueError(kind)


def pollute(kind):
    spawned = _pollute(kind)
    return {"kind": kind, "pid": os.getpid(), "spawned": spawned}


def _group_members():
    """The other processes of this child's group, except its guardian (a fork of the
    child: its child with the same command name)."""
    me, group = os.getpid(), os.getpgrp()
    with open("/proc/self/stat") as f:
        own_name = f.read().partition("(")[2].rpartition(")")[0]
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                head, _, tail = f.read().rpartition(")")
        except OSError:
            continue
        fields = tail.split()
        guardian = int(fields[1]) == me and head.partition("(")[2] == own_name
        if int(fields[2]) == group and fields[0] != "Z" and not guardian:
            found.append(int(name))
    return found


def observe():
    """What an attempt finds of its process's state."""
    return {
        "marker": os.environ.get(MARKER),
        "cwd": os.getcwd(),
        "sigusr1": str(signal.getsignal(signal.SIGUSR1)),
        "sigterm": str(signal.getsignal(signal.SIGTERM)),
        "sighup": str(signal.getsignal(signal.SIGHUP)),
        "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "umask": _umask(),
        "nofile": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
        "core": list(resource.getrlimit(resource.RLIMIT_CORE)),
        "as": list(resource.getrlimit(resource.RLIMIT_AS)),
        "cpu": list(resource.getrlimit(resource.RLIMIT_CPU)),
        "timers": [signal.getitimer(t) != (0.0, 0.0) for t in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL,
                                                                 signal.ITIMER_PROF)],
        "threads": len(os.listdir("/proc/self/task")),
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "affinity": sorted(os.sched_getaffinity(0)),
        "tz": [time.tzname, time.timezone],
        "process_flags": _process_flags(),
        "interpreter": [sys.getrecursionlimit(), sys.get_int_max_str_digits(), sys.getswitchinterval()],
        "sched": os.sched_getscheduler(0),
        "ids": [os.geteuid(), os.getegid()],
        "status": _status(("NoNewPrivs", "Seccomp", "CapBnd", "CapEff", "CapPrm")),
        "netns": os.readlink("/proc/self/ns/net"),
        "group": _group_members(),
    }


def _process_flags():
    deathsig, subreaper = ctypes.c_int(0), ctypes.c_int(0)
    _libc.prctl(PR_GET_PDEATHSIG, ctypes.byref(deathsig), 0, 0, 0)
    _libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(subreaper), 0, 0, 0)
    return [deathsig.value, _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), subreaper.value]


def _status(keys):
    with open("/proc/self/status") as status:
        return [line.strip() for line in status if line.split(":")[0] in keys]


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def running(pid):
    """``pid`` is alive and not a zombie (a zombie whose parent died awaits a reaper)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _left_running(pid, timeout=30.0):
    """Whether ``pid`` still runs ``timeout`` seconds from now (SIGKILL takes effect
    a moment after it is sent: the wait ends as soon as it has)."""
    give_up = time.monotonic() + timeout
    while running(pid) and time.monotonic() < give_up:
        time.sleep(0.01)
    return running(pid)


def check(previous):
    spawned = previous.get("spawned") if previous else None
    return {"state": observe(), "pid": os.getpid(), "previous_pid": previous["pid"] if previous else None,
            "spawned_left": spawned is not None and _left_running(spawned)}


polluted = Pipeline("iso_polluted").start(pollute).chain(to=check)
observed = Pipeline("iso_observed").start(check)


def log_and_print(i):
    """Logs and prints a line (the capture starts a flush timer), returns its process id."""
    import logging

    logging.getLogger("iso").warning("line %d", i)
    print("printed", i)
    return os.getpid()


logs = Pipeline("iso_logs").start(log_and_print)
fresh = Pipeline("iso_fresh").start(pollute, isolation="fresh").chain(to=check, isolation="fresh")


def allocate(megabytes):
    block = bytearray(megabytes * 1024 * 1024)
    return {"pid": os.getpid(), "bytes": len(block)}


def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return "burned"


def burn_ignoring_xcpu(seconds):
    signal.signal(signal.SIGXCPU, signal.SIG_IGN)  # the soft limit's signal does nothing
    return burn(seconds)


memory_hungry = (Pipeline("iso_memory").start(allocate, memory_limit=256 * 1024 * 1024, max_retry=2,
                                              retry_delay=0).chain(to=check))
cpu_hungry = Pipeline("iso_cpu").start(burn, cpu_limit=1, max_retry=2, retry_delay=0, timeout=60)
cpu_hungry_ignoring = Pipeline("iso_cpu_ignoring").start(burn_ignoring_xcpu, cpu_limit=1, max_retry=2,
                                                         retry_delay=0, timeout=60)


def _lift(which):
    """Try to lift the attempt's limit as far as the process may: to unlimited, else
    the soft limit to the hard one. Returns what was in force before and after."""
    import resource

    before = resource.getrlimit(which)
    for wanted in ((resource.RLIM_INFINITY, resource.RLIM_INFINITY), (before[1], before[1])):
        try:
            resource.setrlimit(which, wanted)
            break
        except (ValueError, OSError):
            continue
    return before, resource.getrlimit(which)


def lift_then_allocate(megabytes):
    """Lifts its memory_limit (if it can), then allocates twice its limit."""
    import resource

    _lift(resource.RLIMIT_AS)
    return allocate(megabytes)


def lift_then_burn(seconds):
    """Lifts its cpu_limit (if it can), then burns CPU past it."""
    import resource

    _lift(resource.RLIMIT_CPU)
    return burn(seconds)


memory_lifting = Pipeline("iso_memory_lifting").start(lift_then_allocate, memory_limit=256 * 1024 * 1024,
                                                      max_retry=0, timeout=60)
cpu_lifting = Pipeline("iso_cpu_lifting").start(lift_then_burn, cpu_limit=1, max_retry=0, timeout=60)
within_limits = (Pipeline("iso_within").start(allocate, memory_limit=512 * 1024 * 1024, cpu_limit=30)
                 .chain(to=check))


class StrRaises(Exception):
    def __str__(self):
        raise ValueError("no text")


class StrNotText(Exception):
    def __str__(self):
        return 5


class StrUnencodable(Exception):
    def __str__(self):
        return "nul\x00 and a lone \ud800 surrogate"


def raise_unrenderable(kind):
    raise {"raises": StrRaises, "not_text": StrNotText, "unencodable": StrUnencodable}[kind]()


unrenderable = Pipeline("iso_unrenderable").start(raise_unrenderable, max_retry=1)


def leave_session_slowly(seconds):
    """Start a process in a session of its own and return its pid, leaving a thread
    that runs on for ``seconds``: the restore waits for it a moment before it reports
    both, so the child's RETIRE reaches its parent well after the result."""
    threading.Thread(target=time.sleep, args=(seconds,), daemon=True).start()
    return subprocess.Popen(["sleep", "3600"], start_new_session=True).pid


left_alone = Pipeline("iso_left_alone").start(leave_session_slowly)
