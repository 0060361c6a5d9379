"""A real PgBouncer in transaction pooling mode, started for the tests that need it
(import as `pgbouncer_support`).

Each instance writes its configuration and user list into a directory of its own,
listens on a free port of 127.0.0.1, runs as a subprocess and is stopped by its PID.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from urllib.parse import urlparse

import psycopg

BINARY = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PgBouncer:
    process: subprocess.Popen[bytes]
    port: int
    folder: str
    user: str

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def admin(self, command: str) -> list[tuple[object, ...]]:
        """Run a command on PgBouncer's admin console (``SHOW POOLS``, ...)."""
        with psycopg.connect(self.url("pgbouncer"), autocommit=True, prepare_threshold=None) as conn:
            cur = conn.execute(command)
            return list(cur.fetchall())

    def log(self) -> str:
        with open(os.path.join(self.folder, "pgbouncer.log"), encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)  # by its PID, never by name
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def start(upstream_url: str, *, pool_size: int = 20, max_client_conn: int = 1000,
          attempts: int = 5) -> PgBouncer:
    """Start PgBouncer (``pool_mode = transaction``) in front of the server of
    ``upstream_url``; every database of that server is reachable through it."""
    upstream = urlparse(upstream_url)
    user = upstream.username or "postgres"
    last_error = ""
    for _ in range(attempts):  # a free port can be taken between probe and bind
        folder = tempfile.mkdtemp(prefix="ductline-pgbouncer-")
        os.chmod(folder, 0o755)  # PgBouncer started as root drops to the postgres user
        port = free_port()
        config = os.path.join(folder, "pgbouncer.ini")
        userlist = os.path.join(folder, "userlist.txt")
        with open(userlist, "w", encoding="utf-8") as fh:
            fh.write(f'"{user}" ""\n')
        lines = [
            "[databases]",
            f"* = host={upstream.hostname or '127.0.0.1'} port={upstream.port or 5432}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {userlist}",
            "pool_mode = transaction",
            f"max_client_conn = {max_client_conn}",
            f"default_pool_size = {pool_size}",
            "reserve_pool_size = 0",
            f"admin_users = {user}",
            "ignore_startup_parameters = extra_float_digits",
            f"logfile = {os.path.join(folder, 'pgbouncer.log')}",
        ]
        if os.geteuid() == 0:
            lines.append("user = postgres")  # PgBouncer refuses to run as root
        with open(config, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
        for path in (config, userlist):
            os.chmod(path, 0o644)
        log_path = os.path.join(folder, "pgbouncer.log")
        open(log_path, "w").close()
        os.chmod(log_path, 0o666)
        # Its own messages go to the log file (read back if it fails to start).
        process = subprocess.Popen([BINARY, config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        bouncer = PgBouncer(process, port, folder, user)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with psycopg.connect(bouncer.url("pgbouncer"), autocommit=True, connect_timeout=2,
                                     prepare_threshold=None):
                    return bouncer
            except psycopg.Error as exc:
                last_error = str(exc)
                time.sleep(0.05)
        last_error = f"{last_error} {bouncer.log()}"
        bouncer.stop()
    raise RuntimeError(f"PgBouncer did not start: {last_error}")


def route(bouncer: PgBouncer, direct_url: str, monkeypatch: object, *, listen: bool = True) -> str:
    """The URL of ``direct_url``'s database through ``bouncer``, with the settings a
    deployment behind it uses (for this process and the workers it starts, through
    the environment): transaction pooling, and LISTEN on the direct URL
    (``listen=False``: no LISTEN URL, the documented polling fallback)."""
    database = direct_url.rpartition("/")[2]
    monkeypatch.setenv("DUCTLINE_DATABASE_POOLING", "transaction")  # type: ignore[attr-defined]
    if listen:
        monkeypatch.setenv("DUCTLINE_LISTEN_DATABASE_URL", direct_url)  # type: ignore[attr-defined]
    else:
        monkeypatch.delenv("DUCTLINE_LISTEN_DATABASE_URL", raising=False)  # type: ignore[attr-defined]
    return bouncer.url(database)
