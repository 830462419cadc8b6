"""ask_user through the runtime: the ask_user event, the answer reaching the model, the timeout."""

from __future__ import annotations

import asyncio

import pytest

from astro_jupyter.agent.tools.ask_user import AskUserTool
from astro_jupyter.events import AskUser, ToolResult
from tests.agent.runtime_helpers import fast, make_config, running
from tests.fakes.openai_server import Turn, last_tool_results


@pytest.mark.asyncio
async def test_question_pauses_the_loop_until_answered(tmp_path, openai_server) -> None:
    async with running(make_config(tmp_path, openai_server.url), AskUserTool()) as (services, runtime):
        openai_server.script(
            Turn.call("ask_user", {"question": "Which band?", "options": ["V", "K"]}, id="q1"),
            Turn.say("Using K band."),
        )
        handle = await runtime.start_run("photometry please")
        events = []
        async for _, event in handle.events():
            events.append(event)
            if isinstance(event, AskUser):
                assert event.options == ["V", "K"] and event.timeout_secs == 300.0
                assert len(openai_server.chat_requests) == 1  # paused: no further LLM call yet
                assert handle.answer(event.request_id, "K")
        assert (await handle.wait()).reason == "finished"
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.output == "User answered: K" and not result.is_error
    assert last_tool_results(openai_server.chat_requests[1])[0]["content"] == "User answered: K"


@pytest.mark.asyncio
async def test_unanswered_question_times_out_with_a_clear_result(tmp_path, openai_server) -> None:
    config = make_config(tmp_path, openai_server.url)
    async with running(config, AskUserTool(), tuning=fast(ask_user_secs=0.2)) as (services, runtime):
        openai_server.script(Turn.call("ask_user", {"question": "Which band?"}, id="q1"), Turn.say("Assuming V."))
        handle = await runtime.start_run("photometry please")
        await asyncio.wait_for(handle.wait(), 10)
        events = [e async for _, e in handle.events()]
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "did not answer within 0.2 s" in result.output
