"""The ACP agent in-process, driven by the SDK's client side over the SDK's in-memory transport pair:
cancellation, questions the client dismisses or never answers, prompts over the limit, modes, models."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp._transport import memory_transport_pair

from astro_jupyter.acp import serve
from astro_jupyter.agent.executor import ToolLimits
from astro_jupyter.app import AstroApp
from astro_jupyter.app.runs import MAX_PROMPT_CHARS
from astro_jupyter.services.container import Tuning
from tests.acp_agent.client import RecordingClient
from tests.agent.runtime_helpers import FAST
from tests.app.conftest import app_config
from tests.fakes.openai_server import ScriptedCall, Turn


@contextlib.asynccontextmanager
async def connected(tmp_path: Path, openai_url: str, client: RecordingClient, tuning: Tuning = FAST,
                    **settings: Any) -> AsyncIterator[tuple[Any, AstroApp]]:
    app = AstroApp(app_config(tmp_path, openai_url, **settings), source="acp", tuning=tuning)
    await app.start()
    agent_end, client_end = memory_transport_pair()
    server = asyncio.create_task(serve(app, transport=agent_end))
    conn = connect_to_agent(client, client_end)
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        yield conn, app
    finally:
        await conn.close()  # the client goes away: the agent's end reads EOF
        await asyncio.wait_for(server, 30)
        await app.close()


def results(client: RecordingClient, call_id: str) -> list[Any]:
    return [u for u in client.of("tool_call_update") if u.tool_call_id == call_id and u.status in ("completed", "failed")]


@pytest.mark.asyncio
async def test_a_permission_the_client_dismisses_is_denied_and_said(tmp_path, openai_server):
    openai_server.script(Turn.call("file_write", {"path": "x.txt", "content": "x"}, id="w1"), Turn.say("I could not."))
    client = RecordingClient(lambda options: None)  # the user closed the prompt
    async with connected(tmp_path, openai_server.url, client) as (conn, _app):
        new = await conn.new_session(cwd=str(tmp_path / "project"), mcp_servers=[])
        answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("write x")])
    assert answer.stop_reason == "end_turn" and not (tmp_path / "project" / "x.txt").exists()
    notes = [u.content[0].content.text for u in client.of("tool_call_update") if u.tool_call_id == "w1" and u.content]
    assert "the client dismissed the permission request: denied" in notes
    (result,) = results(client, "w1")
    assert result.status == "failed" and "deny" in result.content[0].content.text


@pytest.mark.asyncio
async def test_a_permission_the_client_never_answers_is_denied_when_the_run_stops_waiting(tmp_path, openai_server):
    openai_server.script(Turn.call("file_write", {"path": "x.txt", "content": "x"}, id="w1"), Turn.say("No answer."))
    client = RecordingClient("never")
    async with connected(tmp_path, openai_server.url, client,
                         tuning=dataclasses.replace(FAST, tools=ToolLimits(permission_timeout_secs=0.3))) as (conn, _app):
        new = await conn.new_session(cwd=str(tmp_path / "project"), mcp_servers=[])
        answer = await asyncio.wait_for(conn.prompt(session_id=new.session_id, prompt=[text_block("write x")]), 30)
    assert answer.stop_reason == "end_turn" and client.text() == "No answer."
    assert len(client.questions) == 1 and not (tmp_path / "project" / "x.txt").exists()
    (result,) = results(client, "w1")
    assert result.status == "failed" and "no answer within 0.3s" in result.content[0].content.text


@pytest.mark.asyncio
async def test_always_allow_is_remembered_for_the_session(tmp_path, openai_server):
    openai_server.script(
        Turn.call("file_write", {"path": "a.txt", "content": "a"}, id="w1"),
        Turn.call("file_write", {"path": "b.txt", "content": "b"}, id="w2"),
        Turn.say("Both written."),
    )
    client = RecordingClient(lambda options: "always")
    async with connected(tmp_path, openai_server.url, client) as (conn, _app):
        new = await conn.new_session(cwd=str(tmp_path / "project"), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[text_block("write a and b")])
    assert len(client.questions) == 1  # the second write was not asked again
    assert (tmp_path / "project" / "a.txt").read_text() == "a" and (tmp_path / "project" / "b.txt").read_text() == "b"


@pytest.mark.asyncio
async def test_ask_user_options_become_a_choice_and_free_text_is_not_invented(tmp_path, openai_server):
    openai_server.script(
        Turn.call("ask_user", {"question": "Which band?", "options": ["optical", "radio"]}, id="q1"),
        Turn.call("ask_user", {"question": "Any comment?"}, id="q2"),
        Turn.say("ok"),
    )
    client = RecordingClient(lambda options: next(o.option_id for o in options if o.name == "radio"))
    async with connected(tmp_path, openai_server.url, client) as (conn, _app):
        new = await conn.new_session(cwd=str(tmp_path / "project"), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[text_block("ask me")])
    (call, options), = client.questions  # only the question with options reached the client
    assert call.title == "Which band?" and [o.name for o in options] == ["optical", "radio"]
    assert "radio" in results(client, "q1")[0].content[0].content.text
    assert "can only pick one of offered options" in results(client, "q2")[0].content[0].content.text


@pytest.mark.asyncio
async def test_cancel_mid_stream_stops_the_run_and_keeps_what_was_said(tmp_path, openai_server):
    openai_server.script(Turn.say("word " * 200, delay=0.02, chunk_size=5))
    client = RecordingClient()
    async with connected(tmp_path, openai_server.url, client) as (conn, app):
        new = await conn.new_session(cwd=str(tmp_path / "project"), mcp_servers=[])
        prompt = asyncio.create_task(conn.prompt(session_id=new.session_id, prompt=[text_block("talk")]))
        await client.wait_for(lambda: len(client.of("agent_message_chunk")) >= 2)
        await conn.cancel(session_id=new.session_id)
        answer = await asyncio.wait_for(prompt, 30)
        assert answer.stop_reason == "cancelled"
        (run,) = (await app.get_session(None, new.session_id))["runs"]
        assert run["status"] == "cancelled"
        stored = (await app.session_events(None, new.session_id))["events"]
    full = "word " * 200
    said = "".join(e["event"].get("delta", "") for e in stored if e["event"]["type"] == "text_delta")
    assert said and full.startswith(said) and len(said) < len(full)  # what was streamed is stored, no more
    assert client.text() and full.startswith(client.text())
    assert stored[-1]["event"]["type"] == "done" and stored[-1]["event"]["reason"] == "cancelled"


@pytest.mark.asyncio
async def test_prompt_over_the_limit_is_a_clear_error_and_starts_nothing(tmp_path, openai_server):
    client = RecordingClient()
    async with connected(tmp_path, openai_server.url, client) as (conn, app):
        new = await conn.new_session(cwd=str(tmp_path / "project"), mcp_servers=[])
        with pytest.raises(RequestError) as info:
            await conn.prompt(session_id=new.session_id, prompt=[text_block("x" * (MAX_PROMPT_CHARS + 1))])
        assert info.value.code == -32602
        assert str(info.value) == f"the prompt has {MAX_PROMPT_CHARS + 1} characters; the limit is {MAX_PROMPT_CHARS}"
        assert info.value.data == {"reason": "prompt_too_long"}
        with pytest.raises(RequestError) as image:
            await conn.prompt(session_id=new.session_id,
                              prompt=[{"type": "image", "data": "AAAA", "mimeType": "image/png"}])  # type: ignore[list-item]
        assert image.value.code == -32602 and "takes text prompts" in str(image.value)
        with pytest.raises(RequestError) as unknown:
            await conn.prompt(session_id="ses_nope", prompt=[text_block("hi")])
        assert unknown.value.code == -32002 and "ses_nope" in str(unknown.value)
        assert (await app.get_session(None, new.session_id))["runs"] == []
    assert openai_server.chat_requests == []


@pytest.mark.asyncio
async def test_modes_and_the_model_option(tmp_path, openai_server):
    openai_server.script(Turn.say("one"))
    client = RecordingClient()
    async with connected(tmp_path, openai_server.url, client) as (conn, app):
        new = await conn.new_session(cwd=str(tmp_path / "project"), mcp_servers=[])
        (option,) = new.config_options
        assert {"gpt-4o-mini", "fallback-model", "chain-a", "chain-b"} <= {o.value for o in option.options}
        changed = await conn.set_config_option(config_id="model", session_id=new.session_id, value="chain-a")
        assert changed.config_options[0].current_value == "chain-a"
        with pytest.raises(RequestError) as bad:
            await conn.set_config_option(config_id="model", session_id=new.session_id, value="no-such-model")
        assert bad.value.code == -32602 and "no-such-model" in str(bad.value)
        await conn.set_session_mode(session_id=new.session_id, mode_id="coordinator")
        assert (await app.session(None, new.session_id)).coordinator is True
        with pytest.raises(RequestError):
            await conn.set_session_mode(session_id=new.session_id, mode_id="yolo")
        await conn.set_session_mode(session_id=new.session_id, mode_id="default")
        await conn.prompt(session_id=new.session_id, prompt=[text_block("hi")])
        listed = await conn.list_sessions()
        assert new.session_id in [s.session_id for s in listed.sessions]
    assert openai_server.models_requested() == ["chain-a"]


@pytest.mark.asyncio
async def test_a_cut_off_answer_ends_the_prompt_with_max_tokens_not_end_turn(tmp_path, openai_server):
    """``finish_reason: "length"`` in the answer: the run finishes, but the prompt's stop reason is
    ``max_tokens`` and the client is told it was cut off. A cut inside a tool call's arguments is not
    (the call is not run, the model is told and answers): that prompt ends ``end_turn``."""
    openai_server.script(
        Turn.say("Andromeda is a spiral galaxy at a distance of", finish_reason="length"),
        Turn.calls_(ScriptedCall("file_write", '{"path": "x.txt", "content": "par'), finish_reason="length"),
        Turn.say("Here is a short answer instead."),
    )
    client = RecordingClient()
    async with connected(tmp_path, openai_server.url, client) as (conn, app):
        new = await conn.new_session(cwd=str(tmp_path / "project"), mcp_servers=[])
        cut = await conn.prompt(session_id=new.session_id, prompt=[text_block("Tell me about M 31")])
        said = client.text()
        recovered = await conn.prompt(session_id=new.session_id, prompt=[text_block("Write x")])
        first_run = (await app.get_session(None, new.session_id))["runs"][0]
    assert cut.stop_reason == "max_tokens"
    assert said.startswith("Andromeda is a spiral galaxy at a distance of") and "**Cut off:**" in said
    assert first_run["status"] == "finished"  # the run itself ended normally; only the answer is short
    assert recovered.stop_reason == "end_turn" and client.text().endswith("Here is a short answer instead.")
    assert not (tmp_path / "project" / "x.txt").exists() and client.questions == []


def _offered(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or []}


@pytest.mark.asyncio
async def test_the_coordinator_mode_makes_the_next_run_a_coordinator_run(tmp_path, openai_server):
    """session/set_mode coordinator: the next prompt's run is told it coordinates and is offered the
    delegation tools; back to default, the next one is neither."""
    openai_server.script(Turn.say("I will delegate."), Turn.say("I will do it myself."))
    client = RecordingClient()
    async with connected(tmp_path, openai_server.url, client) as (conn, _app):
        new = await conn.new_session(cwd=str(tmp_path / "project"), mcp_servers=[])
        assert new.modes.current_mode_id == "default"
        await conn.set_session_mode(session_id=new.session_id, mode_id="coordinator")
        await conn.prompt(session_id=new.session_id, prompt=[text_block("Survey M 31 and M 33")])
        await conn.set_session_mode(session_id=new.session_id, mode_id="default")
        await conn.prompt(session_id=new.session_id, prompt=[text_block("Now just M 31")])
    coordinated, plain = openai_server.chat_requests
    delegation = {"delegate_task", "check_task", "synthesize"}
    assert delegation <= _offered(coordinated) and not delegation & _offered(plain)
    assert "coordinator mode" in coordinated["messages"][0]["content"]
    assert "coordinator mode" not in plain["messages"][0]["content"]
