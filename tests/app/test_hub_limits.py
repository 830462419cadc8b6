"""Hub limits an administrator sets for every user: runs at once (``max_runs_per_user``) and the models
users may pick (``allowed_models``), enforced in the application layer so every front end refuses alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from astro_jupyter.app import AstroApp
from astro_jupyter.app.models import ModelNotAllowed
from astro_jupyter.app.runs import TooManyRuns
from astro_jupyter.errors import PermissionDenied, RateLimited
from tests.app.conftest import app_config
from tests.fakes.openai_server import Turn


async def _waiting_for_answer(handle: Any) -> str:
    """The request id of the run's ask_user question, once the run waits on it."""
    async for _seq, event in handle.events():
        if event.type == "ask_user":
            return event.request_id
    raise AssertionError("the run ended without asking")


@pytest.mark.asyncio
async def test_a_second_run_is_refused_while_the_first_goes_on_then_allowed(tmp_path: Path, openai_server: Any) -> None:
    openai_server.script(Turn.call("ask_user", {"question": "Which band?"}, id="q1"), Turn.say("K it is."),
                         Turn.say("Second answer."))
    app = AstroApp(app_config(tmp_path, openai_server.url, max_runs_per_user=1), source="sidebar")
    await app.start()
    try:
        first = await app.start_run_handle("alice", "ask me for a band")
        request_id = await _waiting_for_answer(first)
        with pytest.raises(TooManyRuns) as refused:
            await app.start_run("alice", "another question")
        assert isinstance(refused.value, RateLimited) and refused.value.reason == "too_many_runs"
        assert str(refused.value).startswith("you already have 1 run going and this hub allows 1 at once")
        assert refused.value.retry_after > 0
        assert len(await app.services.runs.list_running()) == 1  # nothing was started or stored for it

        await app.answer("alice", first.run_id, request_id, "K")
        assert (await first.wait()).reason == "finished"
        second = await app.start_run_handle("alice", "another question")
        assert (await second.wait()).reason == "finished" and second.final_text == "Second answer."
    finally:
        await app.close()


@pytest.mark.asyncio
async def test_concurrent_starts_cannot_slip_past_the_cap(tmp_path: Path, openai_server: Any) -> None:
    import asyncio

    openai_server.respond_with(lambda body: Turn.call("ask_user", {"question": "wait"}))
    app = AstroApp(app_config(tmp_path, openai_server.url, max_runs_per_user=2), source="sidebar")
    await app.start()
    try:
        outcomes = await asyncio.gather(*(app.start_run("bob", f"q{i}") for i in range(5)), return_exceptions=True)
        started = [o for o in outcomes if isinstance(o, dict)]
        assert len(started) == 2, outcomes
        assert all(isinstance(o, TooManyRuns) for o in outcomes if not isinstance(o, dict))
        # another identity on the same server has its own allowance
        assert "run_id" in await app.start_run("carol", "mine")
        for run in started:
            await app.cancel_run("bob", run["run_id"])
    finally:
        await app.close()


@pytest.mark.asyncio
async def test_a_run_another_process_holds_on_the_same_library_counts(tmp_path: Path, openai_server: Any) -> None:
    """The user's notebook (a kernel: its own process, ownerless runs) and the sidebar share one allowance."""
    openai_server.script(Turn.call("ask_user", {"question": "Which band?"}, id="q1"), Turn.say("done"))
    config = app_config(tmp_path, openai_server.url, max_runs_per_user=1)
    kernel = AstroApp(config, source="kernel")
    server = AstroApp(app_config(tmp_path, openai_server.url, max_runs_per_user=1), source="sidebar")
    await kernel.start()
    await server.start()
    try:
        cell = await kernel.start_run_handle(None, "ask me")
        request_id = await _waiting_for_answer(cell)
        with pytest.raises(TooManyRuns):
            await server.start_run("alice", "from the sidebar")
        await kernel.answer(None, cell.run_id, request_id, "V")
        await cell.wait()
        openai_server.script(Turn.say("now fine"))
        assert "run_id" in await server.start_run("alice", "from the sidebar")
    finally:
        await server.close()
        await kernel.close()


@pytest.mark.asyncio
async def test_no_cap_by_default(tmp_path: Path, openai_server: Any) -> None:
    openai_server.respond_with(lambda body: Turn.call("ask_user", {"question": "wait"}))
    app = AstroApp(app_config(tmp_path, openai_server.url), source="sidebar")
    await app.start()
    try:
        runs = [await app.start_run("dave", f"q{i}") for i in range(3)]
        assert len({r["run_id"] for r in runs}) == 3
        for run in runs:
            await app.cancel_run("dave", run["run_id"])
    finally:
        await app.close()


@pytest.mark.asyncio
async def test_only_allowed_models_can_be_picked(tmp_path: Path, openai_server: Any) -> None:
    app = AstroApp(app_config(tmp_path, openai_server.url, llm_model="gpt-4o-mini", allowed_models=["chain-*"]),
                   source="sidebar")
    await app.start()
    try:
        listed = await app.models("erin")
        assert listed["models"] == ["gpt-4o-mini", "chain-a", "chain-b"]  # fallback-model is not offered
        with pytest.raises(ModelNotAllowed) as refused:
            await app.switch_model("erin", "fallback-model")
        assert isinstance(refused.value, PermissionDenied) and refused.value.reason == "model_not_allowed"
        assert str(refused.value) == ("the model 'fallback-model' is not allowed on this server; you may pick: "
                                      "gpt-4o-mini, chain-* (set by the administrator: AstroConfig.allowed_models)")
        with pytest.raises(ModelNotAllowed):
            await app.start_run("erin", "hi", model="fallback-model")
        assert openai_server.chat_requests == []  # refused before anything was asked

        assert (await app.switch_model("erin", "chain-b"))["current"] == "chain-b"
        openai_server.script(Turn.say("hello"))
        handle = await app.start_run_handle("erin", "hi")
        await handle.wait()
        assert openai_server.models_requested() == ["chain-b"]
        assert (await app.switch_model("erin", "gpt-4o-mini"))["current"] == "gpt-4o-mini"  # the default stays
    finally:
        await app.close()


def test_the_limits_come_from_the_spawners_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from astro_jupyter.config import AstroConfig

    monkeypatch.setenv("ASTRO_ALLOWED_MODELS", "gpt-4o-mini, llama-3*,")
    monkeypatch.setenv("ASTRO_MAX_RUNS_PER_USER", "3")
    config = AstroConfig()
    assert config.allowed_models == ["gpt-4o-mini", "llama-3*"] and config.max_runs_per_user == 3
