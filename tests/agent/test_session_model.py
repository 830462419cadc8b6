"""Sessions record the model they run with (and each turn where it changed), for every surface."""

from __future__ import annotations

import pytest

from astro_jupyter.cli import main
from tests.agent.runtime_helpers import make_config, running
from tests.fakes.openai_server import Turn


@pytest.mark.asyncio
async def test_session_lists_its_model_and_the_turn_that_changed_it(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.say("one"), Turn.say("two"), Turn.say("three"))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        first = await runtime.start_run("What is M 31?", source="kernel")
        await first.wait()
        assert (await services.sessions.get(first.session_id)).model == "gpt-4o-mini"
        second = await runtime.start_run("and now?", session_id=first.session_id, model="big-model")
        await second.wait()
        third = await runtime.start_run("again", session_id=first.session_id, model="big-model")
        await third.wait()
        session = await services.sessions.get(first.session_id)
        assert session.model == "big-model"
        assert [s.model for s in await services.sessions.list()] == ["big-model"]
        users = [m for m in await services.messages.list(first.session_id) if m.role == "user"]
        assert [m.metadata for m in users] == [{}, {"model": "big-model", "previous_model": "gpt-4o-mini"}, {}]
        assert [r.model for r in await services.runs.list_for_session(first.session_id)] == [
            "gpt-4o-mini", "big-model", "big-model"]
        assert [req["model"] for req in openai_server.chat_requests] == ["gpt-4o-mini", "big-model", "big-model"]


@pytest.mark.asyncio
async def test_a_session_made_empty_by_the_sidebar_gets_the_model_of_its_first_run(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.say("hello"))
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        session = await services.sessions.create(title="from the sidebar", source="sidebar")
        assert session.model == ""
        await (await runtime.start_run("hi", session_id=session.id)).wait()
        assert (await services.sessions.get(session.id)).model == "gpt-4o-mini"
        users = [m for m in await services.messages.list(session.id) if m.role == "user"]
        assert users[0].metadata == {}  # nothing changed: the first model is the session's


@pytest.mark.asyncio
async def test_a_fallback_switch_during_the_run_is_the_sessions_model_afterwards(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.fail(529), Turn.fail(529), Turn.fail(529), Turn.say("from the fallback"))
    cfg = make_config(tmp_path, openai_server.url, sesame_server.url, llm_fallback_model="fallback-model")
    async with running(cfg) as (services, runtime):
        handle = await runtime.start_run("hi")
        await handle.wait()
        assert (await services.sessions.get(handle.session_id)).model == "fallback-model"


@pytest.mark.asyncio
async def test_cli_sessions_shows_the_model(tmp_path, openai_server, sesame_server, monkeypatch, capsys):
    openai_server.script(Turn.say("hello"))
    cfg = make_config(tmp_path, openai_server.url, sesame_server.url)
    async with running(cfg) as (services, runtime):
        handle = await runtime.start_run("hi there", model="my-model")
        await handle.wait()
    monkeypatch.setenv("ASTRO_HOME", cfg.home)
    import asyncio

    code = await asyncio.to_thread(main, ["sessions"])
    assert code == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if handle.session_id in ln)
    assert "my-model" in line and "hi there" in line
