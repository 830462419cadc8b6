"""The LLM's HTTP traffic on a thread of its own, with its own event loop.

Why: every streamed token costs socket reads, HTTP/1.1 chunk parsing, SSE decoding and a JSON
parse (httpx2, httpcore2, anyio, openai). With 20 runs streaming, that was a third of the
server's event-loop time, so every other request (``GET astro/api/sessions``, SSE writes,
permission answers) queued behind it (benchmarks/bench_server_load.py). Here the streams are
read and parsed on a dedicated loop; the caller's loop receives the parsed chunks in batches,
one wake-up for whatever arrived meanwhile. The GIL is still shared, but the server's loop only
waits for the interpreter's switch interval instead of for every stream's callbacks.

``AstroConfig.llm_io`` "inline" runs everything on the caller's loop; "process" (the server's default) reads
the streams in a helper process instead (``io_process.py``).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from typing import Any, AsyncIterator, Awaitable, Callable, Generic, TypeVar

from ..background_loop import BackgroundLoop

T = TypeVar("T")


LLM_IO = BackgroundLoop("astro-llm-io")


class Relay(Generic[T]):
    """Items produced on another thread (or the same loop), consumed in batches on ``loop``.

    The producer appends and schedules at most one wake-up at a time; the consumer drains
    everything that is there. ``finish`` marks the end (with the producer's exception, if any).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: collections.deque[T] = collections.deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self._waiter: asyncio.Future[None] | None = None
        self._finished = False
        self._error: BaseException | None = None

    def put(self, item: T) -> None:
        self._items.append(item)
        self._poke()

    def add(self, items: list[T]) -> bool:
        """Append without waking the consumer; True when it needs a wake-up (see :func:`wake_all`)."""
        self._items.extend(items)
        with self._lock:
            if self._scheduled:
                return False
            self._scheduled = True
            return True

    def finish(self, error: BaseException | None = None) -> None:
        self._error = error
        self._finished = True
        self._poke()

    def _poke(self) -> None:
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # the consumer's loop is gone: nobody is waiting any more
            pass

    @staticmethod
    def wake_all(relays: "list[Relay[Any]]") -> None:
        """Wake the consumers of ``relays`` (each returned True from ``add``) with one call per event
        loop: a reader handing over chunks of twenty streams wakes the server's loop once, not twenty times."""
        by_loop: dict[asyncio.AbstractEventLoop, list[Relay[Any]]] = {}
        for relay in relays:
            by_loop.setdefault(relay._loop, []).append(relay)
        for loop, group in by_loop.items():
            try:
                loop.call_soon_threadsafe(_wake_each, group)
            except RuntimeError:  # that loop is gone: nobody is waiting any more
                pass

    def _wake(self) -> None:
        with self._lock:
            self._scheduled = False
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def batches(self) -> AsyncIterator[list[T]]:
        while True:
            if self._items:
                batch = []
                while self._items:
                    batch.append(self._items.popleft())
                yield batch
                continue
            if self._finished:
                if self._items:
                    continue
                if self._error is not None:
                    raise self._error
                return
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None


def _wake_each(relays: "list[Relay[Any]]") -> None:
    for relay in relays:
        relay._wake()


async def relay_stream(
    produce: Callable[[Callable[[T], None]], Awaitable[None]], *, threaded: bool
) -> AsyncIterator[T]:
    """Run ``produce(put)`` on the LLM I/O loop (or this loop) and yield what it puts, in order.

    The producer's exception is raised here, after the items it put before it. Closing this
    generator early (the consumer stopped, or was cancelled) cancels the producer.
    """
    relay: Relay[T] = Relay(asyncio.get_running_loop())

    async def run() -> None:
        await produce(relay.put)

    def done(future: "concurrent.futures.Future[None] | asyncio.Future[None]") -> None:
        if future.cancelled():
            relay.finish(asyncio.CancelledError())
        else:
            relay.finish(future.exception())

    job: concurrent.futures.Future[None] | asyncio.Future[None]
    job = LLM_IO.submit(run()) if threaded else asyncio.ensure_future(run())
    job.add_done_callback(done)
    try:
        async for batch in relay.batches():
            for item in batch:
                yield item
    finally:
        job.cancel()
