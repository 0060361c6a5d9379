"""No process state of one attempt reaches the next on the same slot's child: a
step pollutes its process, the next step on the slot (worker ``--concurrency 1``,
or ``execute(..., concurrency=1)``) finds it as a fresh child would."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys

import iso_app
import pytest

import ductline



def _can(code):
    """Whether this machine's user may run ``code`` (privileges differ between machines)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


# A niceness or scheduling policy the attempt changed is set back only with privileges
# (CAP_SYS_NICE or RLIMIT_NICE): whether this user has them decides the list.
_NICE = _can("import os; n = os.nice(0); os.nice(5); os.setpriority(os.PRIO_PROCESS, 0, n)")
_SCHED = _can("import os; p = os.sched_getscheduler(0); os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0));"
              "os.sched_setscheduler(0, p, os.sched_param(0))")
# Changing ids or entering a new namespace needs root or CAP_SYS_ADMIN; without them
# a step cannot do it either, and those cases are not run.
_ROOT = os.geteuid() == 0
_NETNS = _can("import ctypes; assert ctypes.CDLL(None).unshare(0x40000000) == 0")
_CAPBSET = _can("import ctypes; assert ctypes.CDLL(None).prctl(24, 1, 0, 0, 0) == 0")  # PR_CAPBSET_DROP
RESTORED = (["env", "cwd", "signals", "sigmask", "pending", "rt_queued", "umask", "rlimit", "timer", "affinity", "tz",
             "pdeathsig", "dumpable", "subreaper", "interpreter"] + ["nice"] * _NICE + ["sched"] * _SCHED)
# Cannot be undone: the child is replaced.
RETIRED = (["rlimit_hard", "thread", "process", "orphan", "session", "thread_swap", "no_new_privs"] + ["nice"] * (not _NICE)
           + ["sched"] * (not _SCHED) + ["euid"] * _ROOT + ["netns"] * _NETNS + ["capbnd"] * _CAPBSET)


def _baseline_worker(store):
    handle = iso_app.observed.trigger(None, database=store)
    assert handle.wait(60) == "completed"
    return handle.output()["state"]


@pytest.mark.parametrize("kind", RESTORED + RETIRED)
def test_worker_next_attempt_on_the_slot_finds_a_clean_process(store, inprocess_worker, kind):
    inprocess_worker(concurrency=1)
    baseline = _baseline_worker(store)
    handle = iso_app.polluted.trigger(kind, database=store)
    assert handle.wait(60) == "completed"
    found = handle.output()
    assert found["state"] == baseline
    assert not found["spawned_left"]  # a process the attempt started in a session of its own was killed
    if kind in RESTORED:  # restored in place: the same child ran both attempts
        assert found["pid"] == found["previous_pid"]
    else:
        assert found["pid"] != found["previous_pid"]


@pytest.mark.parametrize("kind", RESTORED + RETIRED)
def test_execute_next_attempt_finds_a_clean_process(kind):
    baseline = ductline.execute(iso_app.observed, None, concurrency=1).steps[0].output["state"]
    result = ductline.execute(iso_app.polluted, kind, concurrency=1)
    assert result.overall_status == "success", result
    found = result.steps[-1].output
    assert found["state"] == baseline
    assert not found["spawned_left"]
    if kind in RESTORED:
        assert found["pid"] == found["previous_pid"]
    else:
        assert found["pid"] != found["previous_pid"]


def test_a_step_that_logs_keeps_its_child(store, inprocess_worker):
    # The capture's flush timer is waited for as the attempt ends: a timer still
    # running at the restore would count as a leftover thread and retire the child.
    inprocess_worker(concurrency=1)
    pids = set()
    for i in range(20):
        handle = iso_app.logs.trigger(i, database=store)
        assert handle.wait(60) == "completed"
        pids.add(handle.output())
    assert len(pids) == 1


def test_fresh_isolation_gives_every_attempt_a_new_process(store, inprocess_worker):
    inprocess_worker(concurrency=1)
    handle = iso_app.fresh.trigger("env", database=store)
    assert handle.wait(60) == "completed"
    found = handle.output()
    assert found["pid"] != found["previous_pid"]
    assert found["state"]["marker"] is None


def test_execute_fresh_isolation_gives_every_attempt_a_new_process():
    result = ductline.execute(iso_app.fresh, "env", concurrency=1)
    assert result.overall_status == "success", result
    found = result.steps[-1].output
    assert found["pid"] != found["previous_pid"]


# What a child reports when it cannot undo an attempt's change. The report is checked
# in a process of its own (the child that reports it is replaced and killed at once).
RESTORE_SCRIPT = r"""
import ctypes, json, os, resource, signal, subprocess, tempfile, threading, time
from ductline.execution.cleanstate import Snapshot, become_subreaper

become_subreaper()
# A thread before the first snapshot, as a child's watchdog is: the first thread of a
# process installs the C library's own signal handler, which belongs to the baseline.
threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
found = {}

def attempt(kind, pollute):
    snapshot = Snapshot.take()
    pollute()
    found[kind] = snapshot.restore()

gone = tempfile.mkdtemp()
def delete_cwd():
    os.chdir(gone)
    os.rmdir(gone)
attempt("clean", lambda: os.environ.update(LEFT="1"))
found["left"] = os.environ.get("LEFT")
start = os.getcwd()
attempt("cwd_deleted", delete_cwd)
os.chdir(start)  # a child would be retired here; this process goes on to the next case
signal.setitimer(signal.ITIMER_VIRTUAL, 3600)  # the baseline's own timer
attempt("timer", lambda: signal.setitimer(signal.ITIMER_REAL, 3600))
found["timers_left"] = [signal.getitimer(t) != (0.0, 0.0) for t in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL)]
signal.setitimer(signal.ITIMER_VIRTUAL, 0)
attempt("rlimit_hard", lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
attempt("c_signal", lambda: ctypes.CDLL(None).signal(signal.SIGUSR2, 1))  # SIG_IGN, from C
def exited_unreaped():
    pid = os.posix_spawn("/bin/true", ["true"], os.environ)
    while open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] != "Z":
        time.sleep(0.01)
    found["zombie_pid"] = pid
attempt("zombie", exited_unreaped)
found["zombie_reaped"] = not os.path.exists(f"/proc/{found['zombie_pid']}")
attempt("thread", lambda: threading.Thread(target=time.sleep, args=(3600,), daemon=True).start())
attempt("orphan", lambda: subprocess.run(["sh", "-c", "sleep 3600 &"], check=True))
from ductline.execution import cleanstate
def swap_namespaces_descriptor():
    # Another process's namespaces (here the same ones) put where restore reads its own:
    # after an unshare this would hide the change, so it counts as one.
    other = os.open(f"/proc/{os.getppid()}/ns", os.O_RDONLY | os.O_DIRECTORY)
    os.dup2(other, cleanstate._ns_dir[0])
    os.close(other)
attempt("ns_swapped", swap_namespaces_descriptor)
def swap_status_descriptor():
    # A signal ignored from C, and a copy of the status from before that change put
    # where restore reads its own: the change is still found.
    with tempfile.TemporaryFile() as copy:
        copy.write(open("/proc/self/status", "rb").read())
        copy.flush()
        ctypes.CDLL(None).signal(signal.SIGUSR1, 1)
        os.dup2(copy.fileno(), cleanstate._status._fd)
attempt("status_swapped", swap_status_descriptor)
print(json.dumps(found))
for pid in open(f"/proc/self/task/{os.getpid()}/children").read().split():
    os.kill(int(pid), signal.SIGKILL)
"""


def test_restore_undoes_what_it_can_and_reports_what_it_cannot(tmp_path):
    done = subprocess.run([sys.executable, "-c", RESTORE_SCRIPT], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["clean"] == [] and found["left"] is None
    # The attempt's alarm is cancelled; a timer already set when the child was ready is not.
    assert found["timer"] == [] and found["timers_left"] == [False, True]
    assert len(found["cwd_deleted"]) == 1
    assert found["cwd_deleted"][0].startswith("working directory not restored ([Errno 2] No such file")
    assert found["rlimit_hard"] == [
        f"resource limit {resource.RLIMIT_CORE} not restored (not allowed to raise maximum limit)"]
    assert found["c_signal"] == ["signal dispositions changed outside Python"]
    assert found["zombie"] == [] and found["zombie_reaped"]  # it had exited: reaped, no problem
    assert found["thread"] == ["1 thread(s) still running"]
    [orphan] = found["orphan"]
    assert re.fullmatch(r"process \d+ started by the attempt is still running", orphan)
    assert found["ns_swapped"] == ["namespaces changed"]
    assert found["status_swapped"] == ["signal dispositions changed outside Python"]


FORKED_SCRIPT = r"""
import os
from ductline.execution import cleanstate
cleanstate.Snapshot.take()  # opens /proc/self/status and keeps it
pid = os.fork()
if pid == 0:
    status = cleanstate._status.read()
    line = next(l for l in status.split(b"\n") if l.startswith(b"Pid:"))
    os._exit(0 if int(line.split()[1]) == os.getpid() else 1)
_, code = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(code))
"""


def test_a_forked_process_reads_its_own_status_not_its_parents(tmp_path):
    done = subprocess.run([sys.executable, "-c", FORKED_SCRIPT], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
