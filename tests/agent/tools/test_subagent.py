"""subagent through the runtime: isolated context, summary only, nested events, hooks, step limits."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from astro_jupyter.agent.hooks import HookRegistry
from astro_jupyter.agent.subagents import SubagentLimitError, resolve_max_steps
from astro_jupyter.agent.tools.ask_user import AskUserTool
from astro_jupyter.agent.tools.base import AgentTool, ToolContext, ToolOutput
from astro_jupyter.agent.tools.subagent import SubagentTool
from astro_jupyter.agent.tools.todo import TodoWriteTool
from astro_jupyter.events import Subagent, TodoUpdate, ToolResult
from tests.agent.runtime_helpers import collect, fast, make_config, make_runtime, running
from tests.fakes.openai_server import ScriptedCall, Turn, last_tool_results

PLAN = {"todos": [{"id": "a", "content": "look up the redshift", "status": "in_progress"}]}


def test_resolve_max_steps_defaults_and_limits() -> None:
    assert resolve_max_steps(None) == 5
    assert resolve_max_steps(10) == 10
    for bad, text in ((11, "above the limit of 10"), (0, "at least 1"), ("many", "integer"), (2.5, "integer")):
        with pytest.raises(SubagentLimitError, match=text):
            resolve_max_steps(bad)


@pytest.mark.asyncio
async def test_subagent_isolated_summary_only_nested_events_and_hooks(tmp_path, openai_server) -> None:
    seen: list[str] = []
    hooks = HookRegistry()

    async def record(event: Any, payload: dict[str, Any]) -> None:
        seen.append(f"{event.value}:{payload.get('subagent_id', '')[:4]}")

    hooks.register("SubagentStart", record)
    hooks.register("SubagentStop", record)
    services, runtime = await make_runtime(
        make_config(tmp_path, openai_server.url), SubagentTool(), TodoWriteTool(), AskUserTool(), hooks=hooks
    )
    try:
        openai_server.script(
            Turn.call("subagent", {"task": "Find the redshift of 3C 273.", "max_steps": 3}, id="sub_call"),
            Turn.call("todo_write", PLAN, id="inner_1"),  # the subagent's step 1
            Turn.say("3C 273 is at z = 0.158."),  # the subagent's summary
            Turn.say("The redshift is 0.158."),  # the parent's answer
        )
        handle = await runtime.start_run("What is the redshift of 3C 273? " + "PARENT-ONLY-CONTEXT")
        events = [e for _, e in await collect(handle)]
        assert (await handle.wait()).reason == "finished"
    finally:
        await runtime.close()
        await services.close()
    subs = [e for e in events if isinstance(e, Subagent)]
    assert [s.phase for s in subs] == ["start", "stop"]
    sid = subs[0].id
    assert subs[0].parent_tool_call_id == "sub_call" and subs[0].task == "Find the redshift of 3C 273."
    assert subs[1].summary == "3C 273 is at z = 0.158." and not subs[1].is_error
    todo = next(e for e in events if isinstance(e, TodoUpdate))
    assert todo.subagent_id == sid  # nested under the subagent
    inner = next(e for e in events if isinstance(e, ToolResult) and e.tool_call_id == "inner_1")
    assert inner.subagent_id == sid
    outer = next(e for e in events if isinstance(e, ToolResult) and e.tool_call_id == "sub_call")
    assert outer.subagent_id is None and outer.output == "3C 273 is at z = 0.158."
    assert outer.metadata["steps"] == 2 and outer.metadata["max_steps"] == 3
    # isolation: the subagent never saw the parent's prompt; the parent sees only the summary
    sub_req = openai_server.chat_requests[1]
    assert not any("PARENT-ONLY-CONTEXT" in (m.get("content") or "") for m in sub_req["messages"])
    # no ask_user/subagent (todo_write is deferred: a small model's prompt offers only the resident few)
    assert sorted(t["function"]["name"] for t in sub_req["tools"]) == ["query_target"]
    parent_req = openai_server.chat_requests[3]
    assert [m["content"] for m in last_tool_results(parent_req)] == ["3C 273 is at z = 0.158."]
    assert not any(m.get("tool_call_id") == "inner_1" for m in parent_req["messages"])
    assert seen == [f"SubagentStart:{sid[:4]}", f"SubagentStop:{sid[:4]}"]


@pytest.mark.asyncio
async def test_more_than_ten_steps_is_an_error_and_starts_nothing(tmp_path, openai_server) -> None:
    async with running(make_config(tmp_path, openai_server.url), SubagentTool()) as (services, runtime):
        openai_server.script(
            Turn.call("subagent", {"task": "long survey", "max_steps": 25}, id="c1"),
            Turn.say("I will keep it shorter."),
        )
        handle = await runtime.start_run("survey")
        events = [e for _, e in await collect(handle)]
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "max_steps 25 is above the limit of 10" in result.output
    assert not any(isinstance(e, Subagent) for e in events)
    assert len(openai_server.chat_requests) == 2


@pytest.mark.asyncio
async def test_subagent_stops_at_its_max_steps(tmp_path, openai_server) -> None:
    async with running(make_config(tmp_path, openai_server.url), SubagentTool(), TodoWriteTool()) as (services, runtime):
        openai_server.script(
            Turn.call("subagent", {"task": "plan forever", "max_steps": 2}, id="c1"),
            Turn.call("todo_write", PLAN, text="step one. "),
            Turn.call("todo_write", PLAN, text="step two. "),
            Turn.say("parent done"),
        )
        handle = await runtime.start_run("go")
        events = [e for _, e in await collect(handle)]
    outer = next(e for e in events if isinstance(e, ToolResult) and e.tool_call_id == "c1")
    assert "stopped after 2 steps" in outer.output and outer.metadata["steps"] == 2
    assert len(openai_server.chat_requests) == 4  # parent, 2 subagent steps, parent


@pytest.mark.asyncio
async def test_ask_user_is_unavailable_in_a_silent_subagent_context(services) -> None:
    from tests.agent.tools.orch_ctx import make_ctx

    async def never(question: str, options: list[str]) -> str:  # pragma: no cover - must not be called
        raise AssertionError("a silent context must not ask")

    ctx, _ = make_ctx(services, silent=True, subagent_id="sub_x", ask_user=never)
    out = await AskUserTool().execute({"question": "Which band?"}, ctx)
    assert out.is_error and "unavailable" in out.content


@pytest.mark.asyncio
async def test_load_tool_inside_a_subagent_loads_for_the_subagent_only(tmp_path, openai_server) -> None:
    from astro_jupyter.agent.tools.compress import CompressContextTool
    from astro_jupyter.agent.tools.load_tool import LoadToolTool
    from astro_jupyter.agent.tools.search_history import SearchHistoryTool

    services, runtime = await make_runtime(
        make_config(tmp_path, openai_server.url), SubagentTool(), LoadToolTool(), SearchHistoryTool(), CompressContextTool()
    )
    try:
        openai_server.script(
            Turn.call("subagent", {"task": "search our history"}, id="s"),
            Turn.calls_(("load_tool", {"names": ["search_history"]}), ("compress_context", {})),
            Turn.say("nothing found"),
            Turn.say("done"),
        )
        handle = await runtime.start_run("go")
        events = [e for _, e in await collect(handle)]
        state = handle.state
    finally:
        await runtime.close()
        await services.close()
    names = [[t["function"]["name"] for t in r["tools"]] for r in openai_server.chat_requests]
    assert "search_history" not in names[1] and "search_history" in names[2]  # the subagent's own steps
    assert "search_history" not in names[3]  # the parent did not load it
    assert state.loaded_tools == set() and not state.compact_requested
    compress = next(e for e in events if isinstance(e, ToolResult) and e.name == "compress_context")
    assert compress.is_error and "compress_context" not in names[1]  # not offered to subagents either


class _SlowTool(AgentTool):
    """A tool that takes a moment, so it is still running when the subagent's stream breaks."""

    name = "slow_lookup"
    description = "Look something up slowly."
    parameters = {"type": "object", "properties": {"q": {"type": "string"}}}

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        await asyncio.sleep(0.3)
        return ToolOutput(f"found {args.get('q')}")


@pytest.mark.asyncio
async def test_tools_started_before_the_subagent_stream_breaks_end_before_its_stop(tmp_path, openai_server) -> None:
    services, runtime = await make_runtime(
        make_config(tmp_path, openai_server.url), SubagentTool(), _SlowTool(), tuning=fast({"max_retries": 0})
    )
    try:
        openai_server.script(
            Turn.call("subagent", {"task": "look up two things"}, id="c1"),
            # role chunk, call 0 header, call 0 arguments, call 1 header (call 0 is handed over), then the drop
            Turn.calls_(ScriptedCall("slow_lookup", {"q": "a"}, "inner_a"), ScriptedCall("slow_lookup", {"q": "b"}, "inner_b"),
                        chunk_size=1000, drop_after=4),
            Turn.say("parent done"),
        )
        handle = await runtime.start_run("go")
        events = [e for _, e in await collect(handle)]
        assert (await handle.wait()).reason == "finished"
    finally:
        await runtime.close()
        await services.close()
    kinds = [(type(e).__name__, getattr(e, "tool_call_id", None) or getattr(e, "phase", None)) for e in events]
    inner = kinds.index(("ToolResult", "inner_a"))
    stop = kinds.index(("Subagent", "stop"))
    assert inner < stop
    stop_event = events[stop]
    assert stop_event.is_error and "stream broke" in stop_event.summary


@pytest.mark.asyncio
async def test_cancelling_the_run_stops_a_subagent_in_the_middle_of_its_stream(tmp_path, openai_server) -> None:
    """The subagent runs the same loop as the run: a cancel abandons its LLM stream at once."""
    services, runtime = await make_runtime(make_config(tmp_path, openai_server.url), SubagentTool())
    hold = threading.Event()  # the subagent's answer never ends by itself
    try:
        openai_server.script(
            Turn.call("subagent", {"task": "Write a long report."}, id="sub_call"),
            Turn.say("A very long report. " * 40, hold=hold),
        )
        handle = await runtime.start_run("Delegate a long report.")
        cancelled = False
        async for _, event in handle.events():
            if event.subagent_id and event.type == "text_delta" and not cancelled:
                cancelled = True
                handle.cancel()
        done = await asyncio.wait_for(handle.wait(), 30)
        events = [e for _, e in await collect(handle)]
    finally:
        hold.set()
        await runtime.close()
        await services.close()
    assert done.reason == "cancelled"
    stop = next(e for e in events if isinstance(e, Subagent) and e.phase == "stop")
    assert stop.is_error and stop.summary == "The subagent was cancelled."
    assert len(openai_server.chat_requests) == 2  # nothing asked after the cancel
