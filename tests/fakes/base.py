"""A real HTTP server on 127.0.0.1 in a background thread, shared by every fake.

Each fake subclasses ``FakeHandler`` and implements ``do_GET``/``do_POST``; the server
records requests so tests can assert what the real client sent. TCP_NODELAY is set and
each response is written in one send, or Nagle + delayed ACK adds ~40 ms per request.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes = b""
    received: float = field(default_factory=time.monotonic)  # when the server read it (back-off checks)

    def json(self) -> Any:
        return json.loads(self.body or b"null")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().server_bind()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (cancel, deadline, test end) is normal here, not a traceback on stderr."""
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def fake(self) -> "FakeServer":
        return self.server.fake  # type: ignore[attr-defined]

    def record(self) -> RecordedRequest:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        req = RecordedRequest(self.command, parts.path, parse_qs(parts.query), dict(self.headers.items()), body)
        with self.fake.lock:
            self.fake.requests.append(req)
        return req

    def send_body(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        head = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"]
        all_headers = {"Content-Type": content_type, "Content-Length": str(len(body)), **(headers or {})}
        head += [f"{k}: {v}" for k, v in all_headers.items()]
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        self.wfile.flush()

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self.send_body(status, json.dumps(payload).encode(), "application/json", headers)


@dataclass
class FakeServer:
    """Start with ``with FakeServer(Handler) as fake: fake.url``; state lives on the instance."""

    handler: type[FakeHandler]
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    state: dict[str, Any] = field(default_factory=dict)

    def start(self) -> "FakeServer":
        self._server = _Server(("127.0.0.1", 0), self.handler)
        self._server.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "FakeServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
