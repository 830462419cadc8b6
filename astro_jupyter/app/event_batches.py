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
"""

from __future__ import annotations

import dataclasses
from typing import Any, AsyncIterator, Sequence

from ..events import Event, TextDelta, ThinkingDelta, to_wire
from ..textsafe import safe_json

MERGEABLE = ("text_delta", "thinking_delta")
# A reader with at least this many events queued (a slow client, a long replay) gets consecutive deltas merged.
MERGE_BACKLOG = 64
Batch = list[tuple[int, str]]


def _mergeable(a: Event, b: Event) -> bool:
    return type(a) is type(b) and a.step == b.step and a.subagent_id == b.subagent_id  # type: ignore[attr-defined]


def coalesce_live(bus: Any, batch: Sequence[tuple[int, Event]], merge_backlog: int = 0) -> Batch:
    """Live events as wire JSON: single events from the bus's cache, merged runs encoded once
    (deltas are merged when the batch holds at least ``merge_backlog`` > 0 events)."""
    merge = 0 < merge_backlog <= len(batch)
    out: Batch = []
    i, n = 0, len(batch)
    while i < n:
        seq, event = batch[i]
        j = i + 1
        if merge and isinstance(event, (TextDelta, ThinkingDelta)):
            while j < n and _mergeable(batch[j][1], event):
                j += 1
        if j - i == 1:
            out.append((seq, bus.encoded(seq)))
        else:
            joined = "".join(str(e.delta) for _, e in batch[i:j])  # type: ignore[attr-defined]
            out.append((batch[j - 1][0], safe_json(to_wire(dataclasses.replace(event, delta=joined)))))  # type: ignore[type-var]
        i = j
    return out


def _merge_key(data: dict[str, Any]) -> tuple[Any, ...] | None:
    if data.get("type") not in MERGEABLE or not isinstance(data.get("delta"), str):
        return None
    return tuple((k, repr(v)) for k, v in data.items() if k != "delta")


def coalesce_stored(batch: Sequence[tuple[int, dict[str, Any]]], merge_backlog: int = 0) -> Batch:
    """Stored wire dicts as JSON, with the same merging as ``coalesce_live``."""
    merge = 0 < merge_backlog <= len(batch)
    out: Batch = []
    i, n = 0, len(batch)
    while i < n:
        seq, data = batch[i]
        key = _merge_key(data) if merge else None
        j = i + 1
        if key is not None:
            while j < n and _merge_key(batch[j][1]) == key:
                j += 1
        if j - i == 1:
            out.append((seq, safe_json(data)))
        else:
            merged = dict(data, delta="".join(d["delta"] for _, d in batch[i:j]))
            out.append((batch[j - 1][0], safe_json(merged)))
        i = j
    return out


async def live_batches(handle: Any, after_seq: int, merge_backlog: int = 0) -> AsyncIterator[Batch]:
    """A live run's events from ``after_seq`` on, one batch per wake-up of the reader."""
    bus = handle.bus
    async for batch in bus.batches(after_seq):
        yield coalesce_live(bus, batch, merge_backlog)
