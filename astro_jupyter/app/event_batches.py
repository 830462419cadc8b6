"""A run's events as batches of ``(id, wire JSON)`` for the SSE writer, deltas merged.

Why: with many runs streaming, the server paid a wake-up, a queue hop and a socket write per
event per reader. A reader now takes every event that is ready in one batch. When a reader
has fallen behind (a batch of at least ``MERGE_BACKLOG`` events: a slow
client, a long replay), consecutive ``text_delta`` (or ``thinking_delta``) events of the same
step and subagent become one event of the same type whose ``delta`` is their text joined,
sent with the id of the last one merged. Nothing is lost or reordered: the client sees every
character, in order, with strictly increasing ids (gaps where deltas were merged), and
``Last-Event-ID`` resumes after the last merged event. A reader that keeps up sees every
event as it was published.

The SSE text of a batch (``sse_blocks``) is built where the batch is made, in the agent host for
sidebar runs: the server forwards those bytes (``Frames``) without touching each event, so its
cost per batch does not grow with the number of events in it.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, NamedTuple, Sequence

from ..events import Event, TextDelta, ThinkingDelta, to_wire
from ..textsafe import clean_text, safe_json

MERGEABLE = ("text_delta", "thinking_delta")
# A reader with at least this many events queued (a slow client, a long replay) gets consecutive deltas merged.
MERGE_BACKLOG = 64
BATCH_LIMIT = 512  # the most events one live batch takes (one write's worth; the rest follows at once)
Batch = list[tuple[int, str]]


class Frames(NamedTuple):
    """Events already written as SSE blocks (``id:`` + ``data:``), ``last_seq`` the id of the last one:
    what a stream resumes after if it has to go on from elsewhere (the store, after a host died)."""

    last_seq: int
    data: bytes


def format_event(seq: int, data: str) -> bytes:
    """One SSE block; text UTF-8 cannot carry (a lone surrogate) is replaced, never a dead stream."""
    block = f"id: {seq}\ndata: {data}\n\n"
    try:
        return block.encode("utf-8")
    except UnicodeEncodeError:
        return clean_text(block).encode("utf-8")


def sse_blocks(batch: Batch) -> Frames:
    """A batch as SSE blocks: one join and one encode for the whole batch (per event only its block's
    text); a batch holding text UTF-8 cannot carry is encoded block by block, each cleaned as needed."""
    text = "".join([f"id: {seq}\ndata: {data}\n\n" for seq, data in batch])
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = b"".join([format_event(seq, item) for seq, item in batch])
    return Frames(batch[-1][0], data)


def _wire(item: Event | dict[str, Any]) -> dict[str, Any]:
    return item if isinstance(item, dict) else to_wire(item)


def _merge_key(item: Event | dict[str, Any]) -> tuple[Any, ...] | None:
    """Neighbours with the same key merge: deltas of one type, step and subagent."""
    if isinstance(item, (TextDelta, ThinkingDelta)):
        return (item.type, item.step, item.subagent_id)
    if isinstance(item, dict) and item.get("type") in MERGEABLE and isinstance(item.get("delta"), str):
        return tuple((k, repr(v)) for k, v in item.items() if k != "delta")
    return None


def coalesce(batch: Sequence[tuple[int, Event | dict[str, Any]]], merge_backlog: int = 0, bus: Any = None) -> Batch:
    """Events (live: a slice of ``bus.batches``, consecutive ids, whose single events come from the
    bus's encoding cache) or stored wire dicts as wire JSON; deltas are merged when the batch holds
    at least ``merge_backlog`` > 0 events. Per event only list work and its merge key, computed once:
    every reader of a busy run pays this for every event."""
    n = len(batch)
    if not n:
        return []
    # a live batch is a run of consecutive ids: its JSON is one slice of the bus's cache
    jsons = bus.encoded_span(batch[0][0], batch[-1][0]) if bus is not None else None
    if not 0 < merge_backlog <= n:
        if jsons is not None:
            return list(zip([seq for seq, _ in batch], jsons))
        return [(seq, safe_json(_wire(item))) for seq, item in batch]
    keys = [_merge_key(item) for _, item in batch]
    out: Batch = []
    i = 0
    while i < n:
        seq, item = batch[i]
        key = keys[i]
        j = i + 1
        if key is not None:
            while j < n and keys[j] == key:
                j += 1
        if j - i > 1:
            joined = "".join(x["delta"] if isinstance(x, dict) else x.delta for _, x in batch[i:j])  # type: ignore[union-attr]
            out.append((batch[j - 1][0], safe_json(dict(_wire(item), delta=joined))))
        else:
            out.append((seq, jsons[i] if jsons is not None else safe_json(_wire(item))))
        i = j
    return out


async def live_batches(handle: Any, after_seq: int, merge_backlog: int = 0, pace: float = 0.0) -> AsyncIterator[Batch]:
    """A live run's events from ``after_seq`` on, one batch per wake-up of the reader.

    ``pace`` > 0: after each batch the reader rests that long before taking the next, so events
    published meanwhile gather in the bus and leave as one batch (a busy stream costs its reader,
    the channel and the socket one write per ``pace``, not one per event); after a quiet spell the
    next event goes at once. This is the one place a run's stream is batched in time, wherever
    the run lives (the agent host for sidebar runs)."""
    bus = handle.bus
    async for batch in bus.batches(after_seq, BATCH_LIMIT):
        yield coalesce(batch, merge_backlog, bus)
        # a full batch: the reader is that far behind already, there is nothing to gather by waiting
        # (resting after it too capped a stream at BATCH_LIMIT events per pace, ~17,000 events/s)
        if pace > 0 and len(batch) < BATCH_LIMIT and not bus.done:
            await asyncio.sleep(pace)
