"""LLM streams read on their own thread (``llm/io_thread.py``): same items and cancellation as on
the caller's loop, and the caller's loop no longer does the HTTP work. (Errors, retries and every
other client behaviour run in both modes in ``test_client.py``.)"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from astro_jupyter.llm import Completed, TextChunk
from astro_jupyter.llm.io_thread import Relay, relay_stream
from tests.fakes.openai_server import Turn
from tests.llm.test_client import collect, make_client


@pytest.mark.asyncio
@pytest.mark.parametrize("threaded", [True, False])
async def test_relay_yields_every_item_in_order_then_the_producers_error(threaded: bool) -> None:
    async def produce(put: Any) -> None:
        for i in range(500):
            put(i)
            if i % 50 == 0:
                await asyncio.sleep(0)
        raise ValueError("endpoint broke")

    got: list[int] = []
    with pytest.raises(ValueError, match="endpoint broke"):
        async for item in relay_stream(produce, threaded=threaded):
            got.append(item)
    assert got == list(range(500))


@pytest.mark.asyncio
async def test_relay_wakes_the_consumer_once_for_many_items() -> None:
    """A burst put from another thread arrives as one batch: one wake-up, not one per item."""
    relay: Relay[int] = Relay(asyncio.get_running_loop())

    def burst() -> None:
        for i in range(1000):
            relay.put(i)
        relay.finish()

    threading.Thread(target=burst).start()
    batches = [batch async for batch in relay.batches()]
    assert [i for b in batches for i in b] == list(range(1000))
    assert len(batches) < 50


@pytest.mark.asyncio
async def test_stream_is_read_on_the_io_thread(openai_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from astro_jupyter.llm import shape

    seen: set[str] = set()
    real = shape.read_chunk

    def spy(chunk: Any) -> Any:
        seen.add(threading.current_thread().name)
        return real(chunk)

    monkeypatch.setattr("astro_jupyter.llm.client.read_chunk", spy)
    openai_server.script(Turn.say("Sgr A* is at the Galactic Centre.", chunk_size=4))
    monkeypatch.setenv("ASTRO_LLM_IO", "thread")
    client = make_client(openai_server.url)
    items = await collect(client)
    assert "".join(i.delta for i in items if isinstance(i, TextChunk)) == "Sgr A* is at the Galactic Centre."
    assert isinstance(items[-1], Completed)
    assert seen == {"astro-llm-io"}
    await client.aclose()

    monkeypatch.setenv("ASTRO_LLM_IO", "inline")
    seen.clear()
    openai_server.script(Turn.say("M 31.", chunk_size=2))
    inline = make_client(openai_server.url)
    assert not inline.threaded
    items = await collect(inline)
    assert "".join(i.delta for i in items if isinstance(i, TextChunk)) == "M 31."
    assert seen == {threading.current_thread().name}
    await inline.aclose()


@pytest.mark.asyncio
@pytest.mark.parametrize("llm_io", ["thread", "process"])
async def test_cancelling_the_consumer_closes_the_stream_where_it_is_read(
    openai_server: Any, monkeypatch: pytest.MonkeyPatch, llm_io: str
) -> None:
    """A cancelled run must not leave the endpoint streaming into a connection nobody reads,
    whether the stream is read on the I/O thread or in the I/O process."""
    monkeypatch.setenv("ASTRO_LLM_IO", llm_io)
    openai_server.script(Turn.say("x" * 400, chunk_size=1, delay=0.02))
    client = make_client(openai_server.url)
    first = asyncio.Event()

    async def consume() -> None:
        async for item in client.stream([{"role": "user", "content": "hi"}]):
            if isinstance(item, TextChunk):
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 20)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the server's writer sees the client go away well before the 8 s the whole answer would take
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not openai_server.state.get("disconnects"):
        await asyncio.sleep(0.05)
    assert openai_server.state.get("disconnects"), "the stream was left open after the consumer was cancelled"
    await client.aclose()


@pytest.mark.asyncio
async def test_wake_all_wakes_a_loop_once_for_many_relays(monkeypatch: pytest.MonkeyPatch) -> None:
    """The I/O process's reader hands chunks of many streams over with one wake-up per event loop."""
    loop = asyncio.get_running_loop()
    relays: list[Relay[int]] = [Relay(loop) for _ in range(20)]
    calls = []
    real = loop.call_soon_threadsafe
    monkeypatch.setattr(loop, "call_soon_threadsafe", lambda *a, **k: calls.append(a) or real(*a, **k))

    def reader() -> None:
        woken = [r for i, r in enumerate(relays) if r.add([i, i + 100])]
        for r in relays:
            r.finish()  # a stream's end in the same read: its wake-up is already pending
        Relay.wake_all(woken)

    threading.Thread(target=reader).start()
    got = [[i for b in [batch async for batch in r.batches()] for i in b] for r in relays]
    assert got == [[i, i + 100] for i in range(20)]
    assert len(calls) == 1  # one wake-up for twenty relays and their ends
