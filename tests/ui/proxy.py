"""A TCP proxy on loopback between the browser and ``jupyter lab``.

UI tests use it to make "the server go away" for real: ``outage()`` drops every open
connection (the sidebar's SSE stream included) and refuses new ones until it ends, so the
page sees the network failures a restart or a flaky link would cause.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Iterator


class TcpProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.target = (host, target_port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.refusing = False
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._closed = False
        self._thread = threading.Thread(target=self._accept_loop, name="ui-proxy", daemon=True)

    def start(self) -> "TcpProxy":
        self._thread.start()
        return self

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets.update((client, upstream))
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                _close(s)
                with self._lock:
                    self._sockets.discard(s)

    def drop_all(self) -> int:
        """Reset every open connection; returns how many sockets were open."""
        with self._lock:
            sockets = list(self._sockets)
            self._sockets.clear()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            _close(s)
        return len(sockets)

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        """Drop all connections and refuse new ones while the block runs."""
        self.refusing = True
        self.drop_all()
        try:
            yield
        finally:
            self.refusing = False

    def close(self) -> None:
        self._closed = True
        _close(self.listener)
        self.drop_all()


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.close()
