"""The ReAct loop end to end: fake LLM (real openai client) + fake Sesame (real httpx2) + SQLite."""

from __future__ import annotations

from typing import Any

import pytest

from astro_jupyter.errors import RunConflict, SessionNotFound
from astro_jupyter.events import Done, ToolResult
from tests.agent.runtime_helpers import collect, make_config, running, types, wires
from tests.fakes.openai_server import ScriptedCall, Turn, last_tool_results


@pytest.mark.asyncio
async def test_query_target_chain_events_and_persistence(tmp_path, openai_server, sesame_server):
    openai_server.script(
        Turn.call("query_target", {"name": "M 87"}, id="call_1", text="Let me look it up. ", chunk_size=3),
        Turn.say("M 87 is at RA 187.7059 deg, Dec +12.3911 deg.", chunk_size=7),
    )
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        handle = await runtime.start_run("Where is M 87?", owner="alice")
        items = await collect(handle)
        done = await handle.wait()
    seqs = [s for s, _ in items]
    assert seqs == list(range(1, len(items) + 1))
    kinds = types(items)
    assert kinds[0] == "session" and kinds[-1] == "done"
    assert kinds.index("tool_call") < kinds.index("tool_result")
    w = wires(items)
    call = next(e for e in w if e["type"] == "tool_call")
    result = next(e for e in w if e["type"] == "tool_result")
    assert call == {"type": "tool_call", "id": "call_1", "name": "query_target", "arguments": {"name": "M 87"}, "step": 1}
    assert result["tool_call_id"] == "call_1" and result["name"] == "query_target" and not result["is_error"]
    assert "12:30:49.42" in result["output"] and result["step"] == 1 and isinstance(result["duration_ms"], int)
    assert result["metadata"]["main_id"] == "M 87"
    text = "".join(e["delta"] for e in w if e["type"] == "text_delta")
    assert text == "Let me look it up. M 87 is at RA 187.7059 deg, Dec +12.3911 deg."
    assert {e["step"] for e in w if e["type"] == "text_delta"} == {1, 2}
    assert w[-1] == {"type": "done", "session_id": handle.session_id, "run_id": handle.run_id, "reason": "finished"}
    assert done.reason == "finished" and handle.final_text.startswith("M 87 is at")
    # the second request carried the tool result back to the model
    second = openai_server.chat_requests[1]
    tool_msgs = last_tool_results(second)
    assert tool_msgs[0]["tool_call_id"] == "call_1" and "NGC 4486" in tool_msgs[0]["content"]
    assert second["messages"][0]["role"] == "system" and "astro-jupyter" in second["messages"][0]["content"]
    assert [t["function"]["name"] for t in second["tools"]] == ["query_target"]


@pytest.mark.asyncio
async def test_messages_session_title_and_stored_events(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.call("query_target", {"name": "Sgr A*"}, id="c1"), Turn.say("Done."))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        handle = await runtime.start_run("Resolve Sgr A* for me please")
        await handle.wait()
        msgs = await services.messages.list(handle.session_id)
        assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
        assert msgs[1].tool_calls[0]["id"] == "c1" and msgs[2].tool_call_id == "c1"
        assert all(m.run_id == handle.run_id for m in msgs)
        session = await services.sessions.get(handle.session_id)
        assert session.title == "Resolve Sgr A* for me please"
        run = await services.runs.get(handle.run_id)
        assert run.status == "finished" and run.finished_at
        stored = await services.runs.events_after(handle.run_id)
        assert [d for _, d in stored] == wires(await collect(handle))
        # a late subscriber replays from any point
        tail = await collect(handle, after_seq=len(stored) - 2)
        assert types(tail) == [d["type"] for _, d in stored[-2:]]


@pytest.mark.asyncio
async def test_resume_stored_session_sends_history(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.say("M 31 is Andromeda."), Turn.say("It is about 765 kpc away."))
    cfg = make_config(tmp_path, openai_server.url, sesame_server.url)
    async with running(cfg) as (services, runtime):
        first = await runtime.start_run("What is M 31?")
        await first.wait()
    # a new process-like runtime on the same DB continues the session
    async with running(cfg) as (services, runtime):
        second = await runtime.start_run("How far is it?", session_id=first.session_id)
        assert (await second.wait()).reason == "finished"
        sent = openai_server.chat_requests[1]["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
        assert sent[2]["content"] == "M 31 is Andromeda." and sent[3]["content"] == "How far is it?"
        msgs = await services.messages.list(first.session_id)
        assert len(msgs) == 4
        assert (await services.sessions.get(first.session_id)).title == "What is M 31?"


@pytest.mark.asyncio
async def test_max_steps_stops_the_loop(tmp_path, openai_server, sesame_server):
    openai_server.respond_with(lambda body: Turn.call("query_target", {"name": f"M {len(body['messages'])}"}))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        handle = await runtime.start_run("loop forever", max_steps=3)
        items = await collect(handle)
        assert items[-1][1].reason == "max_steps"
        assert len(openai_server.chat_requests) == 3
        assert types(items).count("tool_result") == 3
        msgs = await services.messages.list(handle.session_id)
        assert [m.role for m in msgs] == ["user"] + ["assistant", "tool"] * 3


@pytest.mark.asyncio
async def test_bad_json_arguments_and_unknown_tool_become_error_results(tmp_path, openai_server, sesame_server):
    openai_server.script(
        Turn.calls_(ScriptedCall("query_target", '{"name": "M 31"', "bad"), ScriptedCall("launch_rocket", {"x": 1}, "unk")),
        Turn.say("Sorry, retrying is not needed."),
    )
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        handle = await runtime.start_run("try it")
        items = await collect(handle)
        results = {e.tool_call_id: e for _, e in items if isinstance(e, ToolResult)}
        assert results["bad"].is_error and "JSON" in results["bad"].output
        assert results["unk"].is_error and "launch_rocket" in results["unk"].output
        assert items[-1][1].reason == "finished"
        msgs = await services.messages.list(handle.session_id)
        assert [m.role for m in msgs] == ["user", "assistant", "tool", "tool", "assistant"]
        assert {m.tool_call_id for m in msgs if m.role == "tool"} == {"bad", "unk"}


@pytest.mark.asyncio
async def test_unknown_target_is_an_error_result_and_loop_continues(tmp_path, openai_server, sesame_server):
    def responder(body: dict[str, Any]) -> Turn:
        results = last_tool_results(body)
        if not results:
            return Turn.call("query_target", {"name": "Planet Nine"}, id="p9")
        return Turn.say("not found: " + str("not found" in results[0]["content"]))

    openai_server.respond_with(responder)
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        handle = await runtime.start_run("where is Planet Nine")
        await handle.wait()
        assert handle.final_text == "not found: True"


@pytest.mark.asyncio
async def test_llm_failure_is_error_then_done(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.fail(400, "Invalid value for 'messages[0].role': unknown role"))  # (an overflow compacts and retries: test_local_models.py)
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        handle = await runtime.start_run("hello")
        items = await collect(handle)
        assert types(items) == ["session", "error", "done"]
        err = wires(items)[1]
        assert "unknown role" in err["message"] and err["reason"] == "llm"
        assert items[-1][1].reason == "error"
        assert (await services.runs.get(handle.run_id)).status == "error"
        assert [m.role for m in await services.messages.list(handle.session_id)] == ["user"]


@pytest.mark.asyncio
async def test_not_configured_llm_error_names_settings(tmp_path, sesame_server):
    cfg = make_config(tmp_path, "", sesame_server.url, openai_api_key="")
    async with running(cfg) as (services, runtime):
        handle = await runtime.start_run("hello")
        items = await collect(handle)
        assert types(items) == ["session", "error", "done"]
        assert "OPENAI_BASE_URL" in items[1][1].message and items[1][1].reason == "llm_unavailable"


@pytest.mark.asyncio
async def test_model_switch_event_on_overload(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.fail(529), Turn.fail(529), Turn.fail(529), Turn.say("from the fallback"))
    cfg = make_config(tmp_path, openai_server.url, sesame_server.url, llm_fallback_model="fallback-model")
    async with running(cfg) as (services, runtime):
        handle = await runtime.start_run("hi")
        items = await collect(handle)
        switch = next(e for e in wires(items) if e["type"] == "model_switch")
        assert switch == {"type": "model_switch", "from": "gpt-4o-mini", "to": "fallback-model", "reason": "overloaded x3"}
        assert handle.final_text == "from the fallback"


@pytest.mark.asyncio
async def test_thinking_deltas_become_events(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.say("Yes.", reasoning="Considering the question."))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        handle = await runtime.start_run("Is M 31 a galaxy?")
        w = wires(await collect(handle))
        assert "".join(e["delta"] for e in w if e["type"] == "thinking_delta") == "Considering the question."
        assert all(e["step"] == 1 for e in w if e["type"] == "thinking_delta")


@pytest.mark.asyncio
async def test_one_active_run_per_session_and_bad_input(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.say("slow answer " * 5, delay=0.05), Turn.say("second"))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        handle = await runtime.start_run("first")
        with pytest.raises(RunConflict):
            await runtime.start_run("again", session_id=handle.session_id)
        assert runtime.active_runs() == [handle] and runtime.get_run(handle.run_id) is handle
        await handle.wait()
        assert runtime.active_runs() == []
        again = await runtime.start_run("again", session_id=handle.session_id)
        assert (await again.wait()).reason == "finished"
        with pytest.raises(SessionNotFound):
            await runtime.start_run("x", session_id="ses_missing")


@pytest.mark.asyncio
async def test_several_subscribers_see_the_same_events(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.say("a b c d e f g", chunk_size=1, delay=0.005))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        import asyncio

        handle = await runtime.start_run("hi")
        a, b = await asyncio.gather(collect(handle), collect(handle))
        late = await collect(handle)
        assert wires(a) == wires(b) == wires(late)
        assert isinstance(a[-1][1], Done)


@pytest.mark.asyncio
async def test_schema_invalid_arguments_and_malformed_stream(tmp_path, openai_server, sesame_server):
    openai_server.script(
        Turn.call("query_target", {"nom": "M 31"}, id="s1"),  # wrong key: schema error result, loop goes on
        Turn.say("half an answer", malformed=True),  # the endpoint then sends garbage
    )
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        handle = await runtime.start_run("resolve with a typo")
        items = await collect(handle)
        result = next(e for _, e in items if isinstance(e, ToolResult))
        assert result.is_error and result.tool_call_id == "s1" and "name" in result.output
        assert types(items)[-2:] == ["error", "done"] and items[-1][1].reason == "error"
        assert "LLM" in items[-2][1].message
        msgs = await services.messages.list(handle.session_id)
        assert [m.role for m in msgs] == ["user", "assistant", "tool"]


@pytest.mark.asyncio
async def test_default_registry_runtime_sends_sorted_resident_tools(tmp_path, openai_server, sesame_server):
    from astro_jupyter.agent.runtime import AgentRuntime
    from astro_jupyter.services.container import ServiceContainer

    openai_server.script(Turn.say("hello"))
    services = ServiceContainer(make_config(tmp_path, openai_server.url, sesame_server.url))
    await services.start()
    runtime = AgentRuntime(services)
    try:
        handle = await runtime.start_run("hi")
        assert (await handle.wait()).reason == "finished"
        sent = openai_server.chat_requests[0]
        names = [t["function"]["name"] for t in sent["tools"]]
        assert names == sorted(names) and "query_target" in names
        deferred = [t.name for t in runtime.registry.sorted_tools() if t.defer_loading]
        assert not set(deferred) & set(names)
        for name in deferred:  # the deferred catalog is in the system prompt instead
            assert f"- {name}: " in sent["messages"][0]["content"]
    finally:
        await runtime.close()
        await services.close()


@pytest.mark.asyncio
async def test_coordinator_session_gets_meta_tools_and_keeps_them_on_resume(tmp_path, openai_server, sesame_server):
    from astro_jupyter.agent.runtime import AgentRuntime
    from astro_jupyter.services.container import ServiceContainer

    openai_server.script(Turn.say("planning"), Turn.say("still coordinating"), Turn.say("plain"))
    services = ServiceContainer(make_config(tmp_path, openai_server.url, sesame_server.url))
    await services.start()
    runtime = AgentRuntime(services)
    try:
        first = await runtime.start_run("split this", coordinator=True)
        await first.wait()
        again = await runtime.start_run("go on", session_id=first.session_id)
        await again.wait()
        plain = await runtime.start_run("no coordinator")
        await plain.wait()
        names = [[t["function"]["name"] for t in r["tools"]] for r in openai_server.chat_requests]
        assert {"delegate_task", "check_task", "synthesize"} <= set(names[0])
        assert {"delegate_task", "check_task", "synthesize"} <= set(names[1])
        assert "delegate_task" not in names[2]
        assert "coordinator mode" in openai_server.chat_requests[0]["messages"][0]["content"]
        assert (await services.sessions.get(first.session_id)).coordinator is True
    finally:
        await runtime.close()
        await services.close()


@pytest.mark.asyncio
async def test_blank_call_id_is_repaired_in_the_call_and_its_result_alike(tmp_path, openai_server, sesame_server):
    # an endpoint sending a whitespace id: the executor gives the result a real id, and the stored
    # and re-sent assistant message must name the same id or the next request pairs nothing
    openai_server.script(Turn.call("launch_rocket", {"x": 1}, id="   "), Turn.say("done"))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        handle = await runtime.start_run("try it")
        items = await collect(handle)
        assert items[-1][1].reason == "finished"
        sent = openai_server.chat_requests[1]["messages"]
        call_ids = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        result_ids = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
        assert len(call_ids) == 1 and call_ids[0].strip() and call_ids == result_ids
        stored = await services.messages.list(handle.session_id)
        assert stored[1].tool_calls[0]["id"] == stored[2].tool_call_id == call_ids[0]


@pytest.mark.asyncio
async def test_an_answer_that_is_one_huge_line_tells_the_user(tmp_path, openai_server, sesame_server):
    """8 MB and no newline: the run used to end 'finished' with an empty answer and nothing said."""
    openai_server.script(Turn(raw_body=b'data: {"choices": [{"delta": {"content": "' + b"x" * (8 << 20)))
    config = make_config(tmp_path, openai_server.url, sesame_server.url)
    async with running(config) as (services, runtime):
        handle = await runtime.start_run("say something")
        items = await collect(handle)
        assert types(items)[-2:] == ["error", "done"] and items[-1][1].reason == "error", types(items)
        message = items[-2][1].message
        assert "ended without a readable chunk" in message and "no text, no tool call" in message
