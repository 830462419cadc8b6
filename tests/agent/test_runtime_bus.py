"""The per-run event bus (numbering, replay, fan-out, batched persistence) and loop timing rules."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from astro_jupyter.agent.bus import EventBus
from astro_jupyter.events import Done, TextDelta, to_wire
from astro_jupyter.store.runs import RunRepository
from tests.agent.runtime_helpers import collect, make_config, running
from tests.fakes.openai_server import Turn


class CountingRuns(RunRepository):
    """The real repository, counting how many batches (transactions) the bus writes."""

    def __init__(self, db: Any) -> None:
        super().__init__(db)
        self.batches: list[int] = []

    async def append_events(self, run_id: str, events: Any) -> None:
        events = list(events)
        self.batches.append(len(events))
        await super().append_events(run_id, events)


@pytest.mark.asyncio
async def test_thousands_of_events_are_numbered_fanned_out_and_batched(services):
    session = await services.sessions.create()
    await services.runs.create("run_bus", session.id)
    runs = CountingRuns(services.db)
    bus = EventBus("run_bus", runs)
    received: list[list[int]] = [[], []]

    async def subscriber(i: int) -> None:
        async for seq, _ in bus.subscribe():
            received[i].append(seq)

    readers = [asyncio.create_task(subscriber(i)) for i in range(2)]
    await asyncio.sleep(0)
    n = 5000
    for i in range(n):
        bus.publish(TextDelta(delta=f"d{i}", step=1))
        if i % 500 == 0:
            await asyncio.sleep(0)  # a stream yields to the loop now and then
    bus.publish(Done(session_id=session.id, run_id="run_bus"))
    await asyncio.gather(*readers)
    await bus.aclose()
    assert received[0] == received[1] == list(range(1, n + 2))
    stored = await services.runs.events_after("run_bus", 0, 100_000)
    assert [s for s, _ in stored] == list(range(1, n + 2))
    assert stored[10][1] == to_wire(TextDelta(delta="d10", step=1))
    assert sum(runs.batches) == n + 1 and len(runs.batches) <= 30
    late = [seq async for seq, _ in bus.subscribe(after_seq=n - 1)]
    assert late == [n, n + 1]
    with pytest.raises(RuntimeError):
        bus.publish(TextDelta(delta="after done", step=1))


class GatedRuns(RunRepository):
    """The real repository whose event writes wait for the test to open the gate (a slow disk)."""

    def __init__(self, db: Any) -> None:
        super().__init__(db)
        self.gate = asyncio.Event()

    async def append_events(self, run_id: str, events: Any) -> None:
        await self.gate.wait()
        await super().append_events(run_id, events)


@pytest.mark.asyncio
async def test_done_is_seen_only_once_every_event_is_stored(services):
    """A client that saw ``done`` and reopens the session reads it from the store (written by the agent
    host, read by the server): it must find every event, not a run cut short (a CI failure)."""
    session = await services.sessions.create()
    await services.runs.create("run_gated", session.id)
    runs = GatedRuns(services.db)
    bus = EventBus("run_gated", runs, flush_interval=0)
    seen: list[str] = []

    async def reader() -> None:
        async for _, event in bus.subscribe():
            seen.append(event.type)

    task = asyncio.create_task(reader())
    for i in range(3):
        bus.publish(TextDelta(delta=f"d{i}", step=1))
    bus.publish(Done(session_id=session.id, run_id="run_gated"))
    done, _ = await asyncio.wait({task}, timeout=0.3)
    assert not done and seen == ["text_delta"] * 3  # the writes are held: done is not out yet
    runs.gate.set()
    await asyncio.wait_for(task, 10)
    assert seen[-1] == "done"
    assert [s for s, _ in await services.runs.events_after("run_gated")] == [1, 2, 3, 4]


@pytest.mark.asyncio
async def test_concurrency_safe_call_starts_while_the_model_still_streams(tmp_path, openai_server, sesame_server):
    # The second call's arguments are long and slow to stream; the first call must already be running.
    long_args = {"name": "M 87", "why": "x" * 120}
    openai_server.script(Turn.calls_(("query_target", {"name": "M 31"}), ("query_target", long_args), chunk_size=4, delay=0.01), Turn.say("ok"))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        handle = await runtime.start_run("two targets")
        await handle.wait()
    first_lookup = sesame_server.state["times"][0]
    stream_end = openai_server.stream_ends[0]
    assert first_lookup < stream_end - 0.1  # ~30 more chunks of 10 ms followed the first call


@pytest.mark.asyncio
async def test_failing_and_hanging_command_hooks_do_not_break_the_run(tmp_path, openai_server, sesame_server):
    hooks = [
        {"event": "UserPromptSubmit", "command": "exit 3"},
        {"event": "PreToolUse", "command": f"{sys.executable} -c 'import time; time.sleep(5)'", "matcher": "*", "timeout": 0.3},
        {"event": "Stop", "command": "echo not-json"},
    ]
    openai_server.script(Turn.call("query_target", {"name": "M 31"}), Turn.say("fine"))
    cfg = make_config(tmp_path, openai_server.url, sesame_server.url, command_hooks=hooks)
    async with running(cfg) as (services, runtime):
        from astro_jupyter.agent.hooks import HookRegistry

        runtime.hooks = HookRegistry.from_config(cfg, entry_points=False)
        handle = await runtime.start_run("with hooks")
        items = await asyncio.wait_for(collect(handle), 20)
        assert items[-1][1].reason == "finished" and handle.final_text == "fine"
        result = next(e for _, e in items if e.type == "tool_result")
        assert not result.is_error and "M 31" in result.output
        msgs = await services.messages.list(handle.session_id)
        assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.asyncio
async def test_a_cancel_as_ask_user_starts_ends_the_run_without_asking(tmp_path, openai_server, sesame_server):
    """The cancel lands after the executor's last check, as the tool starts and before it creates its
    question (the server's cancel request is handled between the two under load). The question must
    not wait out its timeout for an answer no one will give: the run ends as cancelled, nothing asked."""
    from astro_jupyter.agent.tools.ask_user import AskUserTool
    from tests.agent.runtime_helpers import fast

    class CancelledAsItStarts(AskUserTool):
        handle: Any = None

        async def execute(self, args: dict[str, Any], ctx: Any) -> Any:
            self.handle.cancel()
            return await super().execute(args, ctx)

    tool = CancelledAsItStarts()
    openai_server.script(Turn.call("ask_user", {"question": "Which band?"}), Turn.say("never reached"))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url), tool,
                       tuning=fast(ask_user_secs=120)) as (services, runtime):
        tool.handle = await runtime.start_run("ask me")
        items = await asyncio.wait_for(collect(tool.handle), 20)  # not the question's 120 s
    assert items[-1][1].reason == "cancelled"
    assert not [e for _, e in items if e.type == "ask_user"]
