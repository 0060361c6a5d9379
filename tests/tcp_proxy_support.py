"""A TCP proxy in a thread of the test process, to cut a worker off from its
database and back (import as `tcp_proxy_support`).

``stop()`` closes the listening socket and every connection through it, so the
database looks gone: connections break and new ones are refused. ``hold()`` keeps
every connection open and forwards nothing, as a network partition that drops
packets without a reset looks: reads wait for an answer that never comes.
"""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlparse, urlunparse


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to ``target`` (host, port)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stopped = False
        self._held = threading.Event()
        self.server_ports: list[int] = []  # the local port of each connection to the server
        threading.Thread(target=self._accept, daemon=True).start()

    @classmethod
    def for_url(cls, url: str) -> tuple["TcpProxy", str]:
        """A proxy in front of the server of a PostgreSQL ``url``, and the URL through it."""
        parts = urlparse(url)
        proxy = cls((parts.hostname or "127.0.0.1", parts.port or 5432))
        netloc = (f"{parts.username}@" if parts.username else "") + f"127.0.0.1:{proxy.port}"
        return proxy, urlunparse(parts._replace(netloc=netloc))

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # stopped
            try:
                server = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._stopped:
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
                self.server_ports.append(int(server.getsockname()[1]))
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if self._held.is_set():
                    continue  # swallowed: the connection stays open and silent
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def hold(self) -> None:
        """Forward nothing from now on, on open and new connections alike, and close none."""
        self._held.set()

    def stop(self) -> None:
        """Close the listener and every connection: the database is unreachable."""
        with self._lock:
            self._stopped = True
            sockets, self._sockets = self._sockets, []
        self._listener.close()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
