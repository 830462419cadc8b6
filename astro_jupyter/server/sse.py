"""``GET astro/api/runs/{run_id}/events``: a run's events as Server-Sent Events.

Each event is one ``id: <seq>`` + ``data: <wire json>`` block, so a browser's EventSource
reconnects with ``Last-Event-ID`` and the stream resumes at the next event: from the live
run when it is still in this server, else from the store (which holds every event of every
run, so this also works after a restart). ``?last_event_id=`` does the same for clients
that cannot set headers.

A reader task pulls batches of events (everything ready, deltas merged: ``app/event_batches``)
into a small queue as SSE bytes (``Frames``: a sidebar run's come from the agent host already
built, so this process does nothing per event; the store's are built here, once per batch); the
writer sends whatever is queued as one write and flush. The first event
after a pause goes out at once; while events keep coming, the run's stream gives a batch at
most once per ``SsePacing.batch_secs`` (handed to ``run_events``: it is paced where the run lives,
``event_batches.live_batches``, the one place), so a busy run costs the host, the channel and this
server per batch, not per event. A slow client holds its reader back (the queue is short), so
its events gather upstream and come out merged. A comment line goes out when nothing happened for
``SsePacing.keepalive_secs`` so proxies keep the connection open. A client that goes
away only stops its own reader: the run goes on, other clients too.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, AsyncIterator

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from ..app.event_batches import Batch, Frames, format_event, sse_blocks
from .base import AUTH_RESOURCE, SSE_PACING_KEY, AstroHandler
from .runs import RUN_ID
from ..errors import InvalidRequest

@dataclass(frozen=True)
class SsePacing:
    """How an SSE stream paces its writes (internal tuning; tests hand a faster one in through
    ``ServerApp.tornado_settings[SSE_PACING_KEY]``)."""

    keepalive_secs: float = 15.0  # a comment line this often keeps proxies from closing an idle stream
    # while events keep coming, at most one batch per this long (the first event after a pause goes at once)
    batch_secs: float = 0.03


QUEUE_SIZE = 2  # batches: a slow client makes events wait (and merge) in the bus, not here
_END = object()
_KEEPALIVE = object()


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


__all__ = ["RunEventsHandler", "SsePacing", "format_event", "handlers", "parse_last_event_id"]


class RunEventsHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE
    _track_activity = False  # a long-lived stream is not user activity

    def initialize(self, *args: Any, **kwargs: Any) -> None:
        super().initialize(*args, **kwargs)
        self._closed = asyncio.Event()

    def on_connection_close(self) -> None:
        self._closed.set()
        queue = getattr(self, "_queue", None)
        if queue is not None and not queue.full():
            queue.put_nowait(_END)  # wake the writer now, not at the next event

    @web.authenticated
    @authorized
    async def get(self, run_id: str) -> None:
        after = parse_last_event_id(self.request.headers.get("Last-Event-ID"), self.get_argument("last_event_id", None))
        pacing = self.settings.get(SSE_PACING_KEY) or SsePacing()
        stream = await self.service.run_events(self.owner, run_id, after, pace=max(0.0, float(pacing.batch_secs)))
        if stream is None:  # the run is over and the client has its done: 204 stops EventSource reconnecting
            self.set_status(204)
            self.finish()
            return
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("Cache-Control", "no-cache, no-transform")
        self.set_header("X-Accel-Buffering", "no")
        stream_io = getattr(self.request.connection, "stream", None)
        if stream_io is not None:
            stream_io.set_nodelay(True)  # small event writes must not wait for Nagle + delayed ACK
        keepalive = max(0.05, float(pacing.keepalive_secs))
        queue: asyncio.Queue[Any] = asyncio.Queue(QUEUE_SIZE)
        self._queue = queue
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
        progress = [0]  # blocks written so far, read by the keep-alive ticker
        ticker = asyncio.create_task(_keepalive(queue, keepalive, progress))
        try:
            while not self._closed.is_set():
                item = await queue.get()
                blocks: list[bytes] = []
                end = False
                while True:
                    if item is _END:
                        end = True
                    elif item is _KEEPALIVE:
                        blocks.append(b": keep-alive\n\n")
                        progress[0] -= 1  # a comment is not progress: the next idle interval gets one too
                    elif isinstance(item, BaseException):
                        error = {"type": "error", "message": f"the event stream failed: {item}", "reason": "stream"}
                        blocks.append(f"data: {json.dumps(error)}\n\n".encode())
                        end = True
                    else:
                        blocks.append(item.data)
                    progress[0] += 1
                    if end or queue.empty():
                        break
                    item = queue.get_nowait()
                if blocks:
                    self.write(b"".join(blocks))
                await self.flush()  # whatever was ready goes out now
                if end:
                    return
        finally:
            ticker.cancel()


async def _keepalive(queue: "asyncio.Queue[Any]", interval: float, progress: list[int]) -> None:
    """Every ``interval`` in which nothing was written, queue a comment line (no per-event timers)."""
    seen = 0
    while True:
        await asyncio.sleep(interval)
        if progress[0] == seen and queue.empty():
            queue.put_nowait(_KEEPALIVE)
        seen = progress[0]


async def _pump(stream: AsyncIterator[Batch | Frames], queue: "asyncio.Queue[Any]") -> None:
    """Move batches from the run to the writer as SSE bytes (the stream is paced where the run
    lives: ``event_batches.live_batches``)."""
    try:
        async for batch in stream:
            if batch:
                await queue.put(batch if isinstance(batch, Frames) else sse_blocks(batch))
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
