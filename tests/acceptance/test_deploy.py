"""The deployment files in deploy/, exercised with what a test machine can run.

There is no container engine, Kubernetes cluster or systemd as PID 1 here, so:

- the systemd units pass ``systemd-analyze verify`` (their paths pointed at this
  virtualenv);
- the compose file and the Kubernetes manifests are read as YAML and checked for what
  the deployment relies on: the order of migrate and the rest, probes at the paths and
  ports the processes serve, stop timeouts longer than the worker's shutdown grace,
  no root;
- every container command line (the image's entrypoint, tini, with the command of
  the Dockerfile, the compose file or a manifest) and every unit's ``ExecStart`` runs
  as a script against the real PostgreSQL: ``migrate`` migrates an empty database; a
  worker and a dashboard answer their probes (and the compose healthchecks), a worker
  runs a run of deploy/app.py, and SIGTERM stops each with exit status 0, through tini
  where the container has it.

PostgreSQL only: these files deploy PostgreSQL (SQLite is the embedded default of a
single machine, not something to deploy).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ductline.config import Settings
from ductline.store import open_store
from ductline.store.migrations import latest_version
from helpers import truncate, wait_for

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
BIN = Path(sys.executable).parent
SETTINGS = Settings()
# Beyond the shutdown grace and the kill: recording the last outcomes and exiting.
STOP_MARGIN_SECONDS = 10


# -- reading the files ------------------------------------------------------------------
def dockerfile() -> dict[str, list[str]]:
    """Instructions of deploy/Dockerfile (continuation lines joined), by name."""
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.startswith("#")))
    out: dict[str, list[str]] = {}
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.setdefault(word.upper(), []).append(rest.strip())
    return out


def entrypoint() -> list[str]:
    return list(json.loads(dockerfile()["ENTRYPOINT"][-1]))


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8")))


def manifests() -> list[dict[str, Any]]:
    return [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def containers() -> list[dict[str, Any]]:
    out = []
    for doc in manifests():
        spec = doc.get("spec", {}).get("template", {}).get("spec")
        if spec:
            out.extend({**c, "_pod": spec, "_kind": doc["kind"]} for c in spec["containers"])
    return out


def unit(path: Path) -> dict[str, list[str]]:
    """The ``[Service]`` keys of a unit file (a key may repeat)."""
    section, out = "", {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+)(s?)", str(text).strip())
    assert match, text
    return float(match[1])


def grace_from(env: dict[str, str]) -> float:
    return float(env.get("DUCTLINE_SHUTDOWN_GRACE_SECONDS", SETTINGS.shutdown_grace_seconds))


def least_stop_seconds(env: dict[str, str]) -> float:
    return grace_from(env) + SETTINGS.kill_grace_seconds + STOP_MARGIN_SECONDS


# -- what the files promise ------------------------------------------------------------------
def test_compose_migrates_once_before_the_workers_and_the_dashboard_start() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "migrate", "worker", "dashboard"}
    assert services["migrate"]["command"] == ["ductline", "migrate"]
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in ("worker", "dashboard"):
        assert services[name]["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
        assert services[name]["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert all(s["environment"]["DUCTLINE_DATABASE_URL"].startswith("postgresql://ductline:ductline@postgres:")
               for n, s in services.items() if n != "postgres")


def test_every_stop_timeout_outlasts_the_shutdown_grace() -> None:
    services = compose()["services"]
    worker = services["worker"]
    assert seconds(worker["stop_grace_period"]) >= least_stop_seconds(worker["environment"])
    for container in containers():
        if "worker" in container["args"]:
            env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
            assert container["_pod"]["terminationGracePeriodSeconds"] >= least_stop_seconds(env)
    service = unit(DEPLOY / "systemd" / "ductline-worker.service")
    env = dict(e.split("=", 1) for e in service["Environment"])
    assert seconds(service["TimeoutStopSec"][-1]) >= least_stop_seconds(env)


def test_the_worker_unit_signals_the_worker_alone() -> None:
    # control-group (the default) would SIGTERM every step child at the same moment as
    # the worker, instead of letting the worker give them their grace.
    assert unit(DEPLOY / "systemd" / "ductline-worker.service")["KillMode"] == ["mixed"]


def test_the_image_runs_as_a_user_under_an_init() -> None:
    instructions = dockerfile()
    assert instructions["USER"][-1] not in ("root", "0")
    assert entrypoint() == ["tini", "--"]
    assert any("apt-get install" in run and " tini" in run for run in instructions["RUN"])
    assert json.loads(instructions["CMD"][-1])[:2] == ["ductline", "worker"]
    for container in containers():
        assert container["_pod"]["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False


def copies() -> list[tuple[list[str], str]]:
    """The Dockerfile's COPY instructions as (sources, destination)."""
    out = []
    for args in dockerfile()["COPY"]:
        *sources, destination = args.split()
        out.append((sources, destination))
    return out


def test_the_image_installs_ductline_from_the_checkout(tmp_path: Path) -> None:
    """ductline is on no package index: the image builds it from the checkout, which the
    compose file gives as the build context. Every file the image copies is in the
    context and let through by .dockerignore, and a wheel built from those files alone
    installs the ductline of this checkout."""
    context = (DEPLOY / compose()["x-ductline"]["build"]["context"]).resolve()
    assert context == REPO
    allowed = {line[1:] for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
               if line.startswith("!")}
    image = tmp_path / "image"
    for sources, destination in copies():
        for source in sources:
            assert (context / source).exists(), source
            assert source in allowed, f"{source} is not let through by .dockerignore"
            target = image / destination.lstrip("/")
            if destination.endswith("/"):
                target = target / Path(source).name
            if (context / source).is_dir():
                shutil.copytree(context / source, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(context / source, target)
    installs = [run for run in dockerfile()["RUN"] if run.startswith("pip install") and "--requirement" not in run]
    assert installs == ['pip install "/src/ductline[postgres,dashboard]"']
    requirements = (DEPLOY / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert not [r for r in requirements if r.strip() and not r.startswith("#") and "ductline" in r]
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"),
                            str(image / "src" / "ductline")], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("ductline-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "ductline/pipeline.py" in names and "ductline/store/postgres/queries.sql" in names


def test_the_probes_ask_what_the_processes_serve() -> None:
    served = 0
    for container in containers():
        args = container["args"]
        if args[1] == "migrate":
            assert "livenessProbe" not in container
            continue
        option = "--metrics-port" if args[1] == "worker" else "--port"
        port = int(args[args.index(option) + 1])
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        live, ready = container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"]
        assert (live["path"], ports[live["port"]]) == ("/healthz", port)
        assert (ready["path"], ports[ready["port"]]) == ("/readyz", port)
        # A readiness probe answers within 3 s (it waits that long for the database).
        assert container["readinessProbe"]["timeoutSeconds"] > 3
        served += 1
    assert served == 2
    kinds = sorted(doc["kind"] for doc in manifests())
    assert kinds == ["Deployment", "Deployment", "Job", "Secret", "Service"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_the_systemd_unit_verifies(path: Path, tmp_path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    (tmp_path / "orders.env").write_text("DUCTLINE_DATABASE_URL=postgresql://localhost/ductline\n")
    text = (text.replace("/opt/orders/venv/bin/", f"{BIN}/").replace("/etc/ductline/orders.env",
                                                                     str(tmp_path / "orders.env"))
            .replace("WorkingDirectory=/opt/orders", f"WorkingDirectory={tmp_path}"))
    copy = tmp_path / path.name
    copy.write_text(text, encoding="utf-8")
    proc = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "", proc.stderr  # not even a warning


# -- every command line, run -------------------------------------------------------------
@dataclass(frozen=True)
class CommandLine:
    source: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    healthchecks: tuple[tuple[str, ...], ...] = ()

    @property
    def verb(self) -> str:
        return self.argv[self.argv.index(next(a for a in self.argv if a.endswith("ductline"))) + 1]


def command_lines() -> list[CommandLine]:
    lines = [CommandLine("Dockerfile CMD", tuple(entrypoint() + json.loads(dockerfile()["CMD"][-1])))]
    for name, service in compose()["services"].items():
        if "command" in service:
            env = {k: str(v) for k, v in service["environment"].items()}
            checks = (tuple(service["healthcheck"]["test"][1:]),) if "healthcheck" in service else ()
            lines.append(CommandLine(f"compose {name}", tuple(entrypoint() + service["command"]),
                                     tuple(sorted(env.items())), checks))
    for container in containers():
        env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
        lines.append(CommandLine(f"{container['_kind']} {container['name']}",
                                 tuple(entrypoint() + container["args"]), tuple(sorted(env.items()))))
    for path in UNITS:
        service = unit(path)
        env = dict(e.split("=", 1) for e in service.get("Environment", []))
        lines.append(CommandLine(path.name, tuple(shlex.split(service["ExecStart"][-1])),
                                 tuple(sorted(env.items()))))
    # The same command in several files runs once, with their settings and checks.
    merged: dict[tuple[str, ...], CommandLine] = {}
    for line in lines:
        seen = merged.get(line.argv)
        merged[line.argv] = line if seen is None else CommandLine(
            f"{seen.source}, {line.source}", line.argv, tuple(sorted({**dict(seen.env), **dict(line.env)}.items())),
            seen.healthchecks + line.healthchecks)
    return list(merged.values())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def _local(argv: tuple[str, ...], ports: dict[str, str]) -> list[str]:
    """The command as this machine runs it: ductline and python from this virtualenv,
    the ports free ones."""
    out = []
    for arg in argv:
        if arg == "ductline" or arg.endswith("/bin/ductline"):
            arg = str(BIN / "ductline")
        elif arg == "python":
            arg = sys.executable
        for old, new in ports.items():
            arg = arg.replace(f":{old}/", f":{new}/")
        out.append(ports.get(arg, arg))
    return out


@pytest.fixture
def pg_url(pg_base_url: str) -> str:
    truncate(pg_base_url)
    return pg_base_url


@pytest.mark.parametrize("line", command_lines(), ids=lambda line: line.source.replace(", ", "+").replace(" ", "-"))
def test_the_command_line_runs(line: CommandLine, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    import os

    if line.argv[0] == "tini":
        assert shutil.which("tini"), "install Debian's tini (./scripts/test does)"
    shutil.copy(DEPLOY / "app.py", tmp_path / "app.py")
    url = request.getfixturevalue("empty_pg_url" if line.verb == "migrate" else "pg_url")
    env = {**os.environ, "DUCTLINE_SPARE_CHILDREN": "0",  # fewer start-ups on a busy test machine
           **dict(line.env), "DUCTLINE_DATABASE_URL": url,
           "TINI_SUBREAPER": "1"}  # tini is not PID 1 here: it reaps as a subreaper
    if line.verb == "migrate":
        proc = subprocess.run(_local(line.argv, {}), cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        store = open_store(url)
        try:
            assert store.schema_version() == latest_version("postgres")
        finally:
            store.close()
        return
    option = "--metrics-port" if line.verb == "worker" else "--port"
    port = line.argv[line.argv.index(option) + 1]
    ports = {port: str(_free_port())}
    base = f"http://127.0.0.1:{ports[port]}"
    stop_within = least_stop_seconds(dict(line.env))
    with subprocess.Popen(_local(line.argv, ports), cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as proc:
        try:
            wait_for(lambda: proc.poll() is not None or _status(base + "/readyz") == 200, timeout=60)
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert _status(base + "/healthz") == 200
            for check in line.healthchecks:
                done = subprocess.run(_local(check, ports), env=env, capture_output=True, text=True, timeout=60)
                assert done.returncode == 0, done.stderr
            if line.verb == "worker":
                triggered = subprocess.run([str(BIN / "ductline"), "trigger", "app.py:orders", "--args", '["A-1"]',
                                            "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                                           timeout=60)
                assert triggered.returncode == 0, triggered.stderr
                run_id = json.loads(triggered.stdout)["run_id"]
                store = open_store(url)
                try:
                    wait_for(lambda: (store.get_run(run_id) or {}).get("status") == "completed", timeout=60)
                finally:
                    store.close()
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(stop_within)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        output = proc.stdout.read() if proc.stdout else ""
    # uvicorn ends its graceful shutdown by raising the signal that asked for it again,
    # so the dashboard's parent (tini, systemd) sees it stopped by SIGTERM: tini exits
    # 128 + 15 then, and systemd counts SIGTERM as a clean stop.
    stopped = {0} if line.verb == "worker" else {0, -signal.SIGTERM, 128 + signal.SIGTERM}
    assert code in stopped, f"exit status {code}:\n{output}"
