"""One event bus per run: numbers events, keeps them, fans them out, persists them in batches.

Why this shape: the sidebar's SSE writer, a kernel widget and ``astro-jupyter ask`` may all
watch the same run, join late, or reconnect with ``Last-Event-ID``. So every event gets a
sequence number (1, 2, 3, ...), stays in memory for the run's life (replay), wakes every
subscriber, and is written to ``agent_events`` by a background task in batches, so a
stream of thousands of deltas per second costs a handful of transactions. The wire JSON is
computed once per event, here (``encoded``), and shared by the persister and every SSE reader.
Readers that fall behind take everything ready at once (``batches``), so a busy server pays
one wake-up per batch, not per event.

Ids never go backwards across a crash: a watcher sees event N only once the store holds a
reservation >= N (``agent_run_seq``, written a block ahead, so watchers rarely wait). The
events written for a run a dead process left behind are numbered after the reservation,
i.e. after every id any client can have seen (``RunRepository.close_interrupted``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, AsyncIterator

from ..events import Done, Event, to_wire
from ..textsafe import safe_json

from ..store.runs import EncodedEvent

if TYPE_CHECKING:
    from ..store.runs import RunRepository

log = logging.getLogger(__name__)

_BATCH_MAX = 512


class EventBus:
    """Publish with ``publish(event)``; read with ``async for seq, event in bus.subscribe(after)``."""

    def __init__(
        self, run_id: str, runs: "RunRepository | None" = None, *, flush_interval: float = 0.02,
        reserve_block: int = 1000, reserved: int = 0,
    ) -> None:
        """``reserved``: ids already reserved in the store (with the run's row); ``reserve_block``:
        how many more each reservation write covers. Without ``runs`` nothing is gated."""
        self.run_id = run_id
        self.runs = runs
        self.flush_interval = flush_interval
        self.reserve_block = max(1, int(reserve_block))
        self._reserved = reserved if runs is not None else -1  # -1: every event is visible at once
        self._reserving: asyncio.Task[None] | None = None
        self.events: list[tuple[int, Event]] = []
        self._json: list[str | None] = []  # the wire JSON of events[i], encoded on first use
        self._pending: list[int] = []  # seqs not yet written to the store
        self._waiter: asyncio.Future[None] | None = None
        self._flush_wanted = asyncio.Event()
        self._closed = False
        self._all_stored = runs is None  # Done stays unseen until every event before it is in the store
        self._persister: asyncio.Task[None] | None = None
        self.persist_errors: list[str] = []
        if runs is not None:
            self._persister = asyncio.get_running_loop().create_task(self._persist_loop())
            self._persister.add_done_callback(self._persister_ended)

    # -- writing -------------------------------------------------------------------------------
    def publish(self, event: Event) -> int:
        """Number, keep, fan out and queue ``event`` for persistence; returns its seq."""
        if self._closed:
            raise RuntimeError(f"run {self.run_id}: event published after Done")
        seq = len(self.events) + 1
        self.events.append((seq, event))
        self._json.append(None)
        if self.runs is not None:
            self._pending.append(seq)
            self._flush_wanted.set()  # the persister batches (waits flush_interval unless full or closed)
        if self._reserved >= 0 and seq > self._reserved - self.reserve_block // 2:
            self._reserve_ahead()
        if self.visible >= seq:
            self._wake()
        if isinstance(event, Done):
            self._closed = True
        return seq

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    @property
    def visible(self) -> int:
        """How many events watchers may see: those whose ids are reserved in the store, and ``Done``
        only once the run's events are all stored: a client that saw ``done`` and reopens the session
        (the server reads it from the store, the agent host wrote it) finds every event."""
        count = len(self.events) if self._reserved < 0 else min(len(self.events), self._reserved)
        if self._closed and not self._all_stored:
            count = min(count, len(self.events) - 1)
        return count

    def _reserve_ahead(self) -> None:
        """Start one reservation write (if none is running) covering a block past the last event."""
        if self._reserving is None or self._reserving.done():
            self._reserving = asyncio.get_running_loop().create_task(self._reserve())

    async def _reserve(self) -> None:
        assert self.runs is not None
        upto = len(self.events) + self.reserve_block
        try:
            await self.runs.reserve_ids(self.run_id, upto)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a stalled stream is worse than a possible id reuse after a crash
            message = f"could not reserve event ids of run {self.run_id}: {exc}; showing events unreserved"
            log.warning(message)
            self.persist_errors.append(message)
            self._reserved = -1
        else:
            self._reserved = max(self._reserved, upto)
            if len(self.events) > self._reserved - self.reserve_block // 2:
                self._reserving = None
                self._reserve_ahead()  # published faster than one write: keep going
        self._wake()

    def encoded(self, seq: int) -> str:
        """The wire JSON of event ``seq`` (always UTF-8 encodable), encoded once however many read it."""
        text = self._json[seq - 1]
        if text is None:
            text = self._json[seq - 1] = safe_json(to_wire(self.events[seq - 1][1]))
        return text

    def encoded_span(self, first: int, last: int) -> list[str]:
        """The wire JSON of events ``first``..``last`` (inclusive): one list slice once they are all
        encoded, which every reader after the first finds (no call per event per reader)."""
        span = self._json[first - 1:last]
        if None in span:
            for seq in range(first, last + 1):
                self.encoded(seq)
            span = self._json[first - 1:last]
        return span  # type: ignore[return-value]

    @property
    def last_seq(self) -> int:
        return len(self.events)

    @property
    def done(self) -> bool:
        return self._closed

    # -- reading -------------------------------------------------------------------------------
    async def subscribe(self, after_seq: int = 0) -> AsyncIterator[tuple[int, Event]]:
        """Replay events after ``after_seq``, then follow live; ends after ``Done``."""
        index = max(0, after_seq)
        while True:
            while index < self.visible:
                item = self.events[index]
                index += 1
                yield item
                if isinstance(item[1], Done):
                    return
            if self._closed and self.visible == len(self.events):
                return
            await self._wait()

    async def batches(self, after_seq: int = 0, limit: int = _BATCH_MAX) -> AsyncIterator[list[tuple[int, Event]]]:
        """Like ``subscribe``, but every event visible when the reader gets to run, in one list
        (up to ``limit``): a reader that fell behind catches up in one step."""
        index = max(0, after_seq)
        while True:
            visible = self.visible
            if index < visible:
                end = min(visible, index + max(1, limit))
                batch = self.events[index:end]
                index = end
                yield batch
                if isinstance(batch[-1][1], Done):  # Done is always the last event
                    return
                continue
            if self._closed and visible == len(self.events):
                return
            await self._wait()

    async def _wait(self) -> None:
        """Until the next event becomes visible (one shared future; shielded so a reader that is
        cancelled does not cancel it for the others)."""
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._waiter)

    # -- persistence ---------------------------------------------------------------------------
    async def _persist_loop(self) -> None:
        while True:
            await self._flush_wanted.wait()
            if not self._closed and self.flush_interval > 0 and len(self._pending) < _BATCH_MAX:
                await asyncio.sleep(self.flush_interval)  # let a burst of deltas gather into one batch
            self._flush_wanted.clear()
            await self._flush_now()
            if self._closed and not self._pending:
                return

    def _persister_ended(self, _task: "asyncio.Task[None]") -> None:
        """Done may be seen now (also when the persister was cancelled: a failed write is logged in
        ``persist_errors`` and replay from memory still has every event)."""
        self._all_stored = True
        self._wake()

    async def _flush_now(self) -> None:
        if not self._pending or self.runs is None:
            return
        seqs, self._pending = self._pending, []
        batch = [(seq, EncodedEvent(self.events[seq - 1][1].type, self.encoded(seq))) for seq in seqs]
        try:
            await self.runs.append_events(self.run_id, batch)
        except Exception as exc:  # noqa: BLE001 - replay from memory still works; the run must go on
            message = f"could not persist {len(batch)} events of run {self.run_id}: {exc}"
            log.warning(message)
            self.persist_errors.append(message)

    async def aclose(self, timeout: float = 10.0) -> None:
        """Wait until every published event is written (called after ``Done``)."""
        if self._persister is None:
            return
        self._flush_wanted.set()
        tasks = [t for t in (self._persister, self._reserving) if t is not None]
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.gather(*tasks)), timeout)
        except asyncio.TimeoutError:
            log.warning("run %s: event persistence did not finish within %.0f s", self.run_id, timeout)
