"""The merging rule of ``app/event_batches`` on its own: which deltas merge, which ids go out."""

from __future__ import annotations

import asyncio
import json

import pytest

from astro_jupyter.agent.bus import EventBus
from astro_jupyter.events import Done, TextDelta, ThinkingDelta, ToolCall
from astro_jupyter.app.event_batches import BATCH_LIMIT, MERGE_BACKLOG, Frames, coalesce, format_event, live_batches, sse_blocks


def _bus(*events) -> EventBus:
    bus = EventBus("run_x")
    for event in events:
        bus.publish(event)
    return bus


@pytest.mark.asyncio
async def test_only_neighbouring_deltas_of_one_stream_merge_and_carry_the_last_id() -> None:
    events = [
        TextDelta(delta="a", step=1), TextDelta(delta="b", step=1),  # 1, 2 -> one "ab" with id 2
        ThinkingDelta(delta="t", step=1),  # 3: another type
        TextDelta(delta="c", step=1), TextDelta(delta="d", step=2),  # 4, 5: another step
        TextDelta(delta="e", step=2, subagent_id="sub_1"), TextDelta(delta="f", step=2, subagent_id="sub_1"),  # 6, 7
        ToolCall(id="call_1", name="read_file", arguments={"path": "x"}, step=2),  # 8
        TextDelta(delta="g", step=2), TextDelta(delta="h", step=2),  # 9, 10
    ]
    bus = _bus(*events)
    out = coalesce(bus.events, 2, bus)
    shown = [(seq, json.loads(data)) for seq, data in out]
    assert [(s, d["type"], d.get("delta"), d.get("subagent_id")) for s, d in shown] == [
        (2, "text_delta", "ab", None), (3, "thinking_delta", "t", None), (4, "text_delta", "c", None),
        (5, "text_delta", "d", None), (7, "text_delta", "ef", "sub_1"), (8, "tool_call", None, None),
        (10, "text_delta", "gh", None),
    ]
    assert shown[0][1] == {"type": "text_delta", "delta": "ab", "step": 1}  # the wire shape of one delta
    # the stored form (wire dicts) merges the same way
    stored = coalesce([(seq, json.loads(bus.encoded(seq))) for seq, _ in bus.events], merge_backlog=2)
    assert stored == out


@pytest.mark.asyncio
async def test_a_reader_that_keeps_up_sees_every_event() -> None:
    bus = _bus(*(TextDelta(delta=str(i), step=1) for i in range(10)))
    assert coalesce(bus.events, 64, bus) == [(s, bus.encoded(s)) for s, _ in bus.events]
    assert coalesce(bus.events, 0, bus) == [(s, bus.encoded(s)) for s, _ in bus.events]


@pytest.mark.asyncio
async def test_batches_hand_a_late_reader_everything_ready_at_once_and_end_at_done() -> None:
    bus = EventBus("run_y")
    got: list[list[int]] = []

    async def read() -> None:
        async for batch in bus.batches(after_seq=2):
            got.append([s for s, _ in batch])

    for i in range(5):
        bus.publish(TextDelta(delta=str(i), step=1))
    reader = asyncio.create_task(read())
    await asyncio.sleep(0)
    bus.publish(TextDelta(delta="5", step=1))
    bus.publish(Done(session_id="s", run_id="run_y"))
    await asyncio.wait_for(reader, 5)
    assert got == [[3, 4, 5], [6, 7]]


class _Handle:
    def __init__(self, bus: EventBus) -> None:
        self.bus = bus


@pytest.mark.asyncio
async def test_a_paced_reader_that_keeps_up_rests_between_batches_and_gets_what_gathered_meanwhile() -> None:
    bus = _bus(TextDelta(delta="a", step=1))
    pace = 0.3
    stream = live_batches(_Handle(bus), 0, MERGE_BACKLOG, pace)
    loop = asyncio.get_running_loop()
    assert [s for s, _ in await stream.__anext__()] == [1]  # the first event after a quiet spell: at once
    asked = loop.time()
    nxt = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(0.05)
    bus.publish(TextDelta(delta="b", step=1))
    bus.publish(TextDelta(delta="c", step=1))
    assert [s for s, _ in await nxt] == [2, 3]  # one batch for what came during the rest
    assert loop.time() - asked >= pace * 0.9
    await stream.aclose()


@pytest.mark.asyncio
async def test_a_paced_reader_a_full_batch_behind_is_not_held_back() -> None:
    """Resting after a full batch capped a stream at BATCH_LIMIT events per pace (~17,000 events/s
    at the server's 30 ms): a reader behind by several batches takes them back to back."""
    bus = _bus(*(TextDelta(delta=str(i), step=1 + i % 2) for i in range(3 * BATCH_LIMIT + 10)))  # steps alternate: no merging
    stream = live_batches(_Handle(bus), 0, MERGE_BACKLOG, pace=30.0)
    sizes = [len(await asyncio.wait_for(stream.__anext__(), 5)) for _ in range(4)]
    assert sizes == [BATCH_LIMIT, BATCH_LIMIT, BATCH_LIMIT, 10]
    await stream.aclose()


def test_sse_blocks_build_a_batch_once_and_clean_what_utf8_cannot_carry() -> None:
    batch = [(7, '{"type":"text_delta","delta":"é"}'), (9, '{"type":"done"}')]
    frames = sse_blocks(batch)
    assert frames == Frames(9, 'id: 7\ndata: {"type":"text_delta","delta":"é"}\n\nid: 9\ndata: {"type":"done"}\n\n'.encode())
    assert frames.data == b"".join(format_event(seq, data) for seq, data in batch)
    bad = sse_blocks([(1, '{"delta":"x\ud800"}'), (2, '{"type":"done"}')])  # a lone surrogate: replaced, the rest kept
    assert bad.last_seq == 2
    assert bad.data.decode("utf-8").endswith('id: 2\ndata: {"type":"done"}\n\n') and "\ufffd" in bad.data.decode("utf-8")
