"""The StatsD sink (optional; Ductwork Pro's sink): UDP datagrams, fire and forget.

Enabled by ``DUCTLINE_STATSD_ADDRESS=host:port`` (``[::1]:8125`` for IPv6) or
``install(statsd="host:port")``; the host defaults to 127.0.0.1 when only
``:port`` is given. Labels travel as DogStatsD tags (understood by Datadog,
Telegraf and the Prometheus statsd_exporter)::

    ductline.job.completed:1|c|#pipeline:orders,step:charge,result:success
    ductline.job.runtime:1234.5|ms|#pipeline:orders,step:charge,result:success
    ductline.jobs.ready:3|g|#pipeline:orders

Counters are ``c``; histograms are timers in milliseconds (``ms``, the StatsD
convention); the queue gauges are sent by `StatsdSink.send_gauges`, which
`ductline.observability.setup` calls periodically. A send that fails (nobody
listening, buffer full) is dropped: metrics never slow the engine down.
"""

from __future__ import annotations

import logging
import re
import socket
from typing import Any

from ductline.errors import ConfigurationError
from ductline.numerals import whole_number
from ductline.observability.metrics import SPECS, MetricSpec, Registry

log = logging.getLogger("ductline.observability")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8125
_UNSAFE = re.compile(r"[|,#:\s@]")


def parse_address(text: str) -> tuple[str, int]:
    """``host:port``, ``:port``, ``host`` or ``[v6]:port`` -> ``(host, port)``.

    Raises:
        ConfigurationError: not an address.
    """
    raw = text.strip()
    host, port = raw, ""
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0:
            raise ConfigurationError(f"malformed StatsD address {text!r}")
        host, rest = raw[1:end], raw[end + 1:]
        if rest and not rest.startswith(":"):
            raise ConfigurationError(f"malformed StatsD address {text!r}")
        port = rest[1:]
    elif raw.count(":") == 1:
        host, port = raw.split(":")
    host = host or DEFAULT_HOST
    try:
        number = whole_number(port) if port else DEFAULT_PORT
    except ValueError:
        raise ConfigurationError(f"StatsD address {text!r}: port {port!r} is not a number") from None
    if not 0 < number < 65536:
        raise ConfigurationError(f"StatsD address {text!r}: port {number} out of range")
    return host, number


def _tag(value: str) -> str:
    return _UNSAFE.sub("_", value)


def format_line(name: str, value: float, kind: str, labels: dict[str, str]) -> str:
    number = f"{value:.6f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)
    tags = ",".join(f"{k}:{_tag(v)}" for k, v in labels.items() if v != "")
    return f"{name}:{number}|{kind}" + (f"|#{tags}" if tags else "")


class StatsdSink:
    """Sends every counter increment and histogram sample of a `Registry`.

    Args:
        address: ``host:port`` (see `parse_address`).
        registry: its gauges are sent by `send_gauges`.

    Raises:
        ConfigurationError: the address is malformed or does not resolve.
    """

    def __init__(self, address: str, registry: Registry | None = None) -> None:
        self.host, self.port = parse_address(address)
        self.registry = registry
        try:
            family, kind, proto, _, sockaddr = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_DGRAM)[0]
        except socket.gaierror as exc:
            raise ConfigurationError(f"StatsD address {address!r}: {exc}") from exc
        self._target = sockaddr
        self._sock = socket.socket(family, kind, proto)
        self._sock.setblocking(False)

    def _send(self, line: str) -> None:
        try:
            self._sock.sendto(line.encode("utf-8"), self._target)
        except OSError:
            pass  # UDP: nobody listening, or the buffer is full -- dropped

    def add(self, spec: MetricSpec, value: float, labels: dict[str, str]) -> None:
        self._send(format_line(spec.name, value, "c", labels))

    def observe(self, spec: MetricSpec, value: float, labels: dict[str, str]) -> None:
        if spec.unit == "s":
            self._send(format_line(spec.name, round(value * 1000, 3), "ms", labels))
        else:
            self._send(format_line(spec.name, value, "h", labels))

    def send_gauges(self) -> int:
        """Send the current gauges (queues, runs); returns how many lines were sent."""
        if self.registry is None:
            return 0
        sent = 0
        for name, series in self.registry.gauges().items():
            labels = SPECS[name].labels
            for key, value in series.items():
                self._send(format_line(name, int(value), "g", dict(zip(labels, key))))
                sent += 1
        return sent

    def close(self) -> None:
        self._sock.close()

    def __repr__(self) -> str:
        return f"StatsdSink({self.host}:{self.port})"


def sink_from(address: Any, registry: Registry) -> StatsdSink:
    return address if isinstance(address, StatsdSink) else StatsdSink(str(address), registry)
