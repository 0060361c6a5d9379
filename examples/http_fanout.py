"""Fetch several HTTP endpoints in parallel, with step timeouts and retries.

One step run per URL (``expand``); each attempt is killed after 3 s and retried with
exponential backoff, so a slow endpoint costs a timeout and a retry, and a flaky one
(HTTP 503) a failed attempt and a retry, while the others finish. ``collapse`` gathers
the responses in URL order.

The file also holds a small test server (stdlib ``http.server``, in a thread) with
four endpoints: ``/users`` and ``/orders`` answer at once, ``/inventory`` hangs on
its first request (longer than the step timeout) and is fast after that, ``/prices``
answers 503 to its first two requests. Run everything in one process::

    python examples/http_fanout.py

or serve the pipeline with a worker and point it at a server of your own::

    ductline worker --app examples/http_fanout.py
    ductline trigger examples/http_fanout.py:fanout --args '["http://127.0.0.1:8000", ["/users", "/orders"]]'
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ductline import Backoff, Pipeline

STEP_TIMEOUT_SECONDS = 3
SLOW_SECONDS = 30          # far beyond the step timeout: the attempt is killed
PATHS = ["/users", "/orders", "/inventory", "/prices"]


# -- steps --------------------------------------------------------------------------


class HTTPStatusError(Exception):
    """A response with a status of 500 or more: worth another attempt."""


def plan_requests(base_url, paths):
    """One URL per path; the expand below fetches each in its own step run."""
    return [base_url.rstrip("/") + path for path in paths]


def fetch(url):
    """GET one URL. Raising lets ductline retry; a hang is killed at the timeout."""
    try:
        with urllib.request.urlopen(url, timeout=STEP_TIMEOUT_SECONDS * 10) as response:
            body = json.loads(response.read().decode("utf-8"))
            return {"url": url, "status": response.status, "body": body}
    except urllib.error.HTTPError as exc:
        if exc.code >= 500:
            raise HTTPStatusError(f"{url}: HTTP {exc.code}") from None
        return {"url": url, "status": exc.code, "body": None}   # a 4xx will not get better


def summarize(responses):
    """The responses in URL order, and a count of the successful ones."""
    return {"ok": sum(1 for r in responses if r["status"] == 200), "responses": responses}


fanout = (
    Pipeline("http_fanout", timeout=120)
    .start(plan_requests)
    .expand(to=fetch, timeout=STEP_TIMEOUT_SECONDS, max_retry=4,
            retry_delay=Backoff.exponential(1, cap=4))
    .collapse(into=summarize)
)


# -- a local test server ------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the name http.server calls
        server = self.server
        with server.lock:
            server.hits[self.path] = server.hits.get(self.path, 0) + 1
            hit = server.hits[self.path]
        if self.path == "/inventory" and hit == 1:
            server.release.wait(SLOW_SECONDS)     # hangs until the server stops or time passes
        if self.path == "/prices" and hit <= 2:
            return self._send(503, {"error": "try again"})
        if self.path not in PATHS:
            return self._send(404, {"error": "no such endpoint"})
        return self._send(200, {"endpoint": self.path, "request": hit})

    def _send(self, status, payload):
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the killed attempt hung up
            pass

    def log_message(self, format, *args):  # noqa: A002 - keep the example's output quiet
        pass


class TestServer(ThreadingHTTPServer):
    """The endpoints described above, on 127.0.0.1 and a free port."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.hits = {}
        self.release = threading.Event()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.shutdown()
        self.server_close()


if __name__ == "__main__":
    import ductline

    with TestServer() as server:
        began = time.monotonic()
        result = ductline.execute(fanout, server.url, PATHS)
        print(f"{result.status} in {time.monotonic() - began:.1f} s")
        for step in result.steps:
            if step.step == "fetch":
                print(f"  {PATHS[step.index]:<11} attempts: {', '.join(a.result for a in step.history)}")
        print(json.dumps(result.metadata["output"], indent=2))
