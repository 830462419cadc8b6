"""Cancel (mid-stream, mid-tool), answers to questions, hooks, DB failure, subagents."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from astro_jupyter.agent.hooks import HookRegistry
from astro_jupyter.agent.tools.base import AgentTool, InterruptBehavior, PermissionRule, ToolContext, ToolOutput
from astro_jupyter.events import AskUser, PermissionRequest, Subagent, TextDelta, ToolCall, ToolResult
from tests.agent.runtime_helpers import collect, fast, make_config, make_runtime, running, types, wires
from tests.fakes.openai_server import Turn


class SleepTool(AgentTool):
    """Sleeps; Cancel behaviour (stops at once when the run is cancelled)."""

    name = "sleep_cancel"
    description = "Sleep for a while."
    parameters = {"type": "object", "properties": {"secs": {"type": "number"}}}

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        await asyncio.sleep(float(args.get("secs", 5)))
        return ToolOutput("slept")


class BlockTool(AgentTool):
    """A write that must not be torn: finishes even when the run is cancelled."""

    name = "careful_write"
    description = "Write carefully."
    interrupt_behavior = InterruptBehavior.BLOCK

    def __init__(self) -> None:
        self.started, self.release = asyncio.Event(), asyncio.Event()

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.started.set()
        await self.release.wait()  # the test lets it finish after the cancel
        return ToolOutput("written completely")


class AskTool(AgentTool):
    name = "ask_something"
    description = "Ask the user."

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        assert ctx.ask_user is not None
        answer = await ctx.ask_user("Which band?", ["V", "K"])
        return ToolOutput(f"user chose {answer}")


class GuardedTool(AgentTool):
    name = "guarded"
    description = "Needs confirmation."

    def check_permissions(self, args: dict[str, Any]) -> list[PermissionRule]:
        return [PermissionRule("ask", self.name, "guarded needs a yes")]

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput("guarded ran")


class BreakDbTool(AgentTool):
    """Test-only: makes the database refuse writes (as a read-only file would)."""

    name = "break_db"
    description = "Break the database."

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        await ctx.services.db.execute("PRAGMA query_only = ON")
        return ToolOutput("db is now read-only")


class SubagentTool(AgentTool):
    name = "delegate"
    description = "Run a subagent."

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        assert ctx.scope is not None
        result = await ctx.scope.spawn_subagent(args["task"], parent_ctx=ctx, max_steps=3)
        assert result is not None
        return ToolOutput(result.summary, is_error=result.is_error, metadata={"steps": result.steps})


async def _first(handle: Any, kind: type) -> Any:
    async for _, event in handle.events():
        if isinstance(event, kind):
            return event
    raise AssertionError(f"no {kind.__name__} event")


@pytest.mark.asyncio
async def test_cancel_mid_stream_keeps_partial_text(tmp_path, openai_server, sesame_server):
    hold = threading.Event()  # the model keeps its answer open until the test ends
    openai_server.script(Turn.say("word " * 200, chunk_size=5, hold=hold))
    services, runtime = await make_runtime(make_config(tmp_path, openai_server.url, sesame_server.url))
    try:
        handle = await runtime.start_run("talk a lot")
        await _first(handle, TextDelta)
        handle.cancel()
        done = await asyncio.wait_for(handle.wait(), 30)  # the stream would never end by itself
        assert done.reason == "cancelled"
        items = await collect(handle)
        assert types(items)[-1] == "done"
        streamed = "".join(e.delta for _, e in items if isinstance(e, TextDelta))
        msgs = await services.messages.list(handle.session_id)
        assert [m.role for m in msgs] == ["user", "assistant"] and msgs[1].content == streamed
        assert 0 < len(streamed) < len("word " * 200)
        assert (await services.runs.get(handle.run_id)).status == "cancelled"
    finally:
        hold.set()
        await runtime.close()
        await services.close()


@pytest.mark.asyncio
async def test_cancel_mid_tool_cancel_tool_stops_block_tool_finishes(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.calls_(("careful_write", {}), ("sleep_cancel", {"secs": 3600})), Turn.say("never"))
    block = BlockTool()
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url), block, SleepTool()) as (services, runtime):
        handle = await runtime.start_run("do both")
        await asyncio.wait_for(block.started.wait(), 30)
        async for _, event in handle.events():  # the model's answer holds both calls (the Block one starts as it streams)
            if isinstance(event, ToolCall) and event.name == "sleep_cancel":
                break
        handle.cancel()
        for _ in range(50):  # let the cancel take effect everywhere it can
            await asyncio.sleep(0)
        assert not handle.finished  # the Block write is still running: the run waits for it
        block.release.set()
        done = await asyncio.wait_for(handle.wait(), 30)  # the Cancel tool would sleep an hour
        assert done.reason == "cancelled"
        results = {e.name: e for _, e in await collect(handle) if isinstance(e, ToolResult)}
        assert results["careful_write"].output == "written completely" and not results["careful_write"].is_error
        assert results["sleep_cancel"].is_error
        msgs = await services.messages.list(handle.session_id)
        assert [m.role for m in msgs] == ["user", "assistant", "tool", "tool"]
        assert len(openai_server.chat_requests) == 1  # no further turn after cancel


@pytest.mark.asyncio
async def test_ask_user_answer_reaches_the_tool(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.call("ask_something", {}), Turn.say("ok"))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url), AskTool()) as (services, runtime):
        handle = await runtime.start_run("ask me")
        question = await _first(handle, AskUser)
        assert question.question == "Which band?" and question.options == ["V", "K"]
        assert handle.answer(question.request_id, "K") is True
        assert handle.answer(question.request_id, "V") is False  # already answered
        await handle.wait()
        result = next(e for _, e in await collect(handle) if isinstance(e, ToolResult))
        assert result.output == "user chose K"


@pytest.mark.asyncio
async def test_permission_request_allow_and_deny(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.call("guarded", {}, id="g1"), Turn.call("guarded", {}, id="g2"), Turn.say("end"))
    cfg = make_config(tmp_path, openai_server.url, sesame_server.url, permission_mode="ask")
    async with running(cfg, GuardedTool()) as (services, runtime):
        handle = await runtime.start_run("guarded twice")
        answers = iter(["allow", "deny"])
        async for _, event in handle.events():
            if isinstance(event, PermissionRequest):
                assert event.name == "guarded"
                handle.answer(event.request_id, next(answers))
        results = {e.tool_call_id: e for _, e in await collect(handle) if isinstance(e, ToolResult)}
        assert results["g1"].output == "guarded ran" and not results["g1"].is_error
        assert results["g2"].is_error


@pytest.mark.asyncio
async def test_hooks_see_prompt_and_stop(tmp_path, openai_server, sesame_server):
    seen: list[tuple[str, dict[str, Any]]] = []

    async def record(event: Any, payload: dict[str, Any]) -> None:
        seen.append((event.value, payload))

    hooks = HookRegistry()
    for name in ("UserPromptSubmit", "SessionStart", "Stop", "SessionEnd"):
        hooks.register(name, record)
    openai_server.script(Turn.say("hi"))
    cfg = make_config(tmp_path, openai_server.url, sesame_server.url)
    async with running(cfg, hooks=hooks) as (services, runtime):
        handle = await runtime.start_run("hello hooks")
        await handle.wait()
        await hooks.drain(timeout=2)
        names = [n for n, _ in seen]
        assert set(names) == {"UserPromptSubmit", "SessionStart", "Stop", "SessionEnd"}
        assert names.index("Stop") < names.index("SessionEnd")
        prompt_payload = dict(seen)["UserPromptSubmit"]
        assert prompt_payload["prompt"] == "hello hooks" and prompt_payload["run_id"] == handle.run_id
        assert dict(seen)["Stop"]["reason"] == "finished"


@pytest.mark.asyncio
async def test_database_refusing_writes_gives_error_and_consistent_history(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.call("break_db", {}, id="b1"), Turn.say("never reached"))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url), BreakDbTool()) as (services, runtime):
        handle = await runtime.start_run("break it")
        items = await collect(handle)
        assert types(items)[-2:] == ["error", "done"] and items[-1][1].reason == "error"
        err = wires(items)[-2]
        assert err["reason"].startswith("store") and err["message"]
        # the turn whose results could not be stored was never announced as done
        assert "tool_result" not in types(items)
        await services.db.execute("PRAGMA query_only = OFF")
        msgs = await services.messages.list(handle.session_id)
        assert [m.role for m in msgs] == ["user"]  # no assistant tool-call turn without its results


@pytest.mark.asyncio
async def test_subagent_runs_isolated_and_tags_events(tmp_path, openai_server, sesame_server):
    def responder(body: dict[str, Any]) -> Turn:
        system = body["messages"][0]["content"]
        user = body["messages"][1]["content"]
        last = body["messages"][-1]
        if "sub-agent" in system:
            if last["role"] == "tool":
                return Turn.say("Sub found: " + last["content"].splitlines()[0])
            return Turn.call("query_target", {"name": "M 31"}, id="sub_call")
        if last["role"] == "tool":
            return Turn.say("Parent got: " + last["content"])
        assert user == "use a helper"
        return Turn.call("delegate", {"task": "resolve M 31"}, id="parent_call")

    openai_server.respond_with(responder)
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url), SubagentTool()) as (services, runtime):
        handle = await runtime.start_run("use a helper")
        items = await collect(handle)
        subs = [e for _, e in items if isinstance(e, Subagent)]
        assert [s.phase for s in subs] == ["start", "stop"] and subs[0].parent_tool_call_id == "parent_call"
        assert subs[1].summary == "Sub found: M 31 (asked: M 31)"
        tagged = [e for _, e in items if e.subagent_id == subs[0].id]
        assert {e.type for e in tagged} >= {"tool_call", "tool_result", "text_delta"}
        assert handle.final_text == "Parent got: Sub found: M 31 (asked: M 31)"
        # the subagent's own messages are not stored in the parent's session
        msgs = await services.messages.list(handle.session_id)
        assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
        assert all(m.tool_call_id != "sub_call" for m in msgs)


@pytest.mark.asyncio
async def test_runtime_close_cancels_active_runs(tmp_path, openai_server, sesame_server):
    hold = threading.Event()
    openai_server.script(Turn.say("x " * 500, chunk_size=2, hold=hold))
    services, runtime = await make_runtime(make_config(tmp_path, openai_server.url, sesame_server.url))
    try:
        handle = await runtime.start_run("long")
        await _first(handle, TextDelta)
        await runtime.close()
        assert handle.reason == "cancelled"
        assert (await services.runs.get(handle.run_id)).status == "cancelled"
    finally:
        hold.set()
        await services.close()


@pytest.mark.asyncio
async def test_interrupted_runs_are_marked_at_startup(tmp_path, openai_server, sesame_server):
    cfg = make_config(tmp_path, openai_server.url, sesame_server.url)
    async with running(cfg) as (services, runtime):
        session = await services.sessions.create(title="old")
        await services.runs.create("run_dead", session.id, prompt="x")
        openai_server.script(Turn.say("fresh"))
        handle = await runtime.start_run("new run")
        await handle.wait()
        assert (await services.runs.get("run_dead")).status == "error"
        assert (await services.runs.get(handle.run_id)).status == "finished"


@pytest.mark.asyncio
async def test_ask_user_without_answer_times_out_cleanly(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.call("ask_something", {}), Turn.say("gave up waiting"))
    cfg = make_config(tmp_path, openai_server.url, sesame_server.url)
    async with running(cfg, AskTool(), tuning=fast(ask_user_secs=0.3)) as (services, runtime):
        handle = await runtime.start_run("ask me")
        items = await asyncio.wait_for(collect(handle), 10)
        result = next(e for _, e in items if isinstance(e, ToolResult))
        assert result.is_error and "no answer within 0.3 s" in result.output
        assert handle.final_text == "gave up waiting" and handle.answers.pending() == []


@pytest.mark.asyncio
async def test_a_second_runtime_on_the_same_store_respects_the_living_run(tmp_path, openai_server, sesame_server):
    """Server and kernel share the DB: a starting runtime closes only dead runs, and a session
    running in the other process is a conflict until that run ends."""
    from astro_jupyter.errors import RunConflict

    hold = threading.Event()  # the first run streams until the test lets it finish
    openai_server.script(Turn.say("slow " * 60, chunk_size=5, hold=hold), Turn.say("after"))
    cfg = make_config(tmp_path, openai_server.url, sesame_server.url)
    services_a, runtime_a = await make_runtime(cfg)
    services_b, runtime_b = await make_runtime(cfg)
    try:
        session = await services_a.sessions.create(title="dead")
        await services_a.runs.create("run_orphan", session.id, prompt="x")  # no lock: its process is gone
        handle = await runtime_a.start_run("long answer")
        await _first(handle, TextDelta)
        await runtime_b.start()  # the second process starting up
        assert (await services_b.runs.get(handle.run_id)).status == "running"
        assert (await services_b.runs.get("run_orphan")).status == "error"
        with pytest.raises(RunConflict, match="another process"):
            await runtime_b.start_run("me too", session_id=handle.session_id)
        hold.set()
        assert (await asyncio.wait_for(handle.wait(), 30)).reason == "finished"
        assert (await services_b.runs.get(handle.run_id)).status == "finished"
        assert not list((tmp_path / "home" / ".run-locks").glob("*.lock"))
        later = await runtime_b.start_run("me too", session_id=handle.session_id)
        assert (await asyncio.wait_for(later.wait(), 30)).reason == "finished"
        roles = [m.role for m in await services_b.messages.list(handle.session_id)]
        assert roles == ["user", "assistant", "user", "assistant"]
    finally:
        hold.set()
        await runtime_a.close()
        await runtime_b.close()
        await services_a.close()
        await services_b.close()
