"""``GET astro/api/runs/{run_id}/events``: a run's events as Server-Sent Events.

Each event is one ``id: <seq>`` + ``data: <wire json>`` block, so a browser's EventSource
reconnects with ``Last-Event-ID`` and the stream resumes at the next event: from the live
run when it is still in this server, else from the store (which holds every event of every
run, so this also works after a restart). ``?last_event_id=`` does the same for clients
that cannot set headers.

A reader task pulls events into a small queue; the writer sends whatever is ready and
flushes at once (no event waits for a later one), and sends a comment line when nothing
happened for ``AstroConfig.sse_keepalive_secs`` so proxies keep the connection open. A
client that goes away only stops its own reader: the run goes on, other clients too.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from .base import AUTH_RESOURCE, AstroHandler
from .runs import RUN_ID
from .service import InvalidRequest

QUEUE_SIZE = 256
MAX_BATCH = 64
_END = object()


def parse_last_event_id(header: str | None, query: str | None) -> int:
    raw = (header if header not in (None, "") else query) or ""
    raw = raw.strip()
    if not raw:
        return 0
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidRequest(f"Last-Event-ID must be an event sequence number, not {raw!r}", reason="invalid_event_id") from exc
    if value < 0:
        raise InvalidRequest("Last-Event-ID must not be negative", reason="invalid_event_id")
    return value


def format_event(seq: int, data: str) -> bytes:
    return f"id: {seq}\ndata: {data}\n\n".encode("utf-8")


class RunEventsHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE
    _track_activity = False  # a long-lived stream is not user activity

    def initialize(self, *args: Any, **kwargs: Any) -> None:
        super().initialize(*args, **kwargs)
        self._closed = asyncio.Event()

    def on_connection_close(self) -> None:
        self._closed.set()

    @web.authenticated
    @authorized
    async def get(self, run_id: str) -> None:
        after = parse_last_event_id(self.request.headers.get("Last-Event-ID"), self.get_argument("last_event_id", None))
        stream = await self.service.run_events(self.owner, run_id, after)
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("Cache-Control", "no-cache, no-transform")
        self.set_header("X-Accel-Buffering", "no")
        keepalive = max(0.05, float(self.service.config.sse_keepalive_secs))
        queue: asyncio.Queue[Any] = asyncio.Queue(QUEUE_SIZE)
        reader = asyncio.create_task(_pump(stream, queue), name=f"sse-{run_id}")
        try:
            self.write(b"retry: 1000\n\n")
            await self.flush()
            await self._write_loop(queue, keepalive)
        except StreamClosedError:
            pass
        finally:
            reader.cancel()
            try:
                await reader
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the reader's end is not the client's
                pass
        if not self._closed.is_set():
            try:
                self.finish(set_content_type="text/event-stream; charset=utf-8")
            except StreamClosedError:
                pass

    async def _write_loop(self, queue: "asyncio.Queue[Any]", keepalive: float) -> None:
        while not self._closed.is_set():
            if queue.empty():
                try:
                    item = await asyncio.wait_for(queue.get(), timeout=keepalive)
                except asyncio.TimeoutError:
                    self.write(b": keep-alive\n\n")
                    await self.flush()
                    continue
            else:
                item = queue.get_nowait()
            batch = 0
            while True:
                if item is _END:
                    await self.flush()
                    return
                if isinstance(item, BaseException):
                    error = {"type": "error", "message": f"the event stream failed: {item}", "reason": "stream"}
                    self.write(f"data: {json.dumps(error)}\n\n".encode())
                    await self.flush()
                    return
                seq, data = item
                self.write(format_event(seq, data))
                batch += 1
                if batch >= MAX_BATCH or queue.empty():
                    break
                item = queue.get_nowait()
            await self.flush()


async def _pump(stream: AsyncIterator[tuple[int, str]], queue: "asyncio.Queue[Any]") -> None:
    try:
        async for item in stream:
            await queue.put(item)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - reported to the client as an error line
        await queue.put(exc)
        return
    finally:
        closer = getattr(stream, "aclose", None)
        if closer is not None:
            try:
                await closer()
            except Exception:  # noqa: BLE001
                pass
    await queue.put(_END)


handlers = [
    (rf"astro/api/runs/{RUN_ID}/events", RunEventsHandler),
]
