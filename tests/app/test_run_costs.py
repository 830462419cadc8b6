"""What a run costs and why it failed, as the sidebar is told: a ``usage`` event before ``done``
(tokens, cost from ``llm_prices`` or None, how full the context is and where compaction starts),
the session's total with ``GET sessions/{id}``, and a machine-readable reason for the LLM errors
a user acts on differently (an unknown model, a rejected key), against the scripted OpenAI server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from astro_jupyter.app import AstroApp
from astro_jupyter.events import Done, Error, Usage
from tests.app.conftest import app_config
from tests.fakes.openai_server import Turn

PRICES = {"gpt-4o-mini": {"input": 0.15, "output": 0.6}}


async def _app(tmp_path: Path, openai_server: Any, **kw: Any) -> AstroApp:
    app = AstroApp(app_config(tmp_path, openai_server.url, **kw), source="cli")
    await app.start()
    return app


async def _run(app: AstroApp, prompt: str, session_id: str | None = None) -> list[Any]:
    handle = await app.start_run_handle(None, prompt, session_id=session_id)
    events = [e async for _, e in handle.events()]
    await handle.wait()
    return events


@pytest.mark.asyncio
async def test_each_run_says_its_tokens_cost_and_context_fill_and_the_session_sums_them(tmp_path, openai_server):
    openai_server.props = {"default_generation_settings": {"n_ctx": 16384}}
    openai_server.script(
        Turn.say("M 31 is the Andromeda galaxy.", usage={"prompt_tokens": 1200, "completion_tokens": 300}),
        Turn.say("It is 765 kpc away.", usage={"prompt_tokens": 2000, "completion_tokens": 100}),
    )
    app = await _app(tmp_path, openai_server, llm_prices=PRICES, llm_model="gpt-4o-mini")
    try:
        first = await _run(app, "What is M 31?")
        usage = [e for e in first if isinstance(e, Usage)]
        assert len(usage) == 1 and isinstance(first[-1], Done)
        u = usage[0]
        assert (u.model, u.prompt_tokens, u.completion_tokens) == ("gpt-4o-mini", 1200, 300)
        assert u.cost_usd == pytest.approx((1200 * 0.15 + 300 * 0.6) / 1e6)
        assert u.context_window == 16384 and u.context_tokens == 1500  # the prompt and the answer, as the server counted
        assert u.context_tokens < u.compact_at < u.context_window

        session_id = first[0].session_id
        await _run(app, "How far is it?", session_id)
        total = (await app.get_session(None, session_id))["usage"]
        assert total == {"runs": 2, "prompt_tokens": 3200, "completion_tokens": 400,
                         "cost_usd": pytest.approx((3200 * 0.15 + 400 * 0.6) / 1e6), "unpriced_runs": 0}
        # stored with the run: a reopened session replays the same figures
        stored = await app.services.runs.usage_events(session_id)
        assert [e["prompt_tokens"] for e in stored] == [1200, 2000]
    finally:
        await app.close()


@pytest.mark.asyncio
async def test_the_figures_follow_each_call_of_a_run(tmp_path, openai_server):
    openai_server.script(
        Turn.call("ask_user", {"question": "Which band?", "options": ["V", "K"]}, id="q1",
                  usage={"prompt_tokens": 800, "completion_tokens": 40}),
        Turn.say("K band it is.", usage={"prompt_tokens": 900, "completion_tokens": 60}),
    )
    app = await _app(tmp_path, openai_server, llm_prices=PRICES, llm_model="gpt-4o-mini")
    try:
        handle = await app.start_run_handle(None, "ask me the band")
        seen: list[Usage] = []
        async for _, event in handle.events():
            if isinstance(event, Usage):
                seen.append(event)
            elif event.type == "ask_user":
                handle.answer(event.request_id, "K")
        await handle.wait()
        # cumulative for the run, while the gauge follows the latest call
        assert [(u.prompt_tokens, u.completion_tokens, u.context_tokens) for u in seen] == [(800, 40, 840), (1700, 100, 960)]
        total = (await app.get_session(None, handle.session_id))["usage"]  # the run counted once, not per call
        assert (total["runs"], total["prompt_tokens"], total["completion_tokens"]) == (1, 1700, 100)
    finally:
        await app.close()


@pytest.mark.asyncio
async def test_a_model_without_a_price_costs_unknown_not_zero(tmp_path, openai_server):
    openai_server.script(Turn.say("Hello.", usage={"prompt_tokens": 500, "completion_tokens": 20}))
    app = await _app(tmp_path, openai_server, llm_prices=PRICES, llm_model="qwen2.5-7b")
    try:
        events = await _run(app, "hi")
        u = next(e for e in events if isinstance(e, Usage))
        assert u.prompt_tokens == 500 and u.cost_usd is None
        total = (await app.get_session(None, events[0].session_id))["usage"]
        assert total["cost_usd"] is None and total["unpriced_runs"] == 1 and total["prompt_tokens"] == 500
    finally:
        await app.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(("status", "reason", "says"), [
    (404, "unknown_model", "does not know model"),
    (401, "auth", "OPENAI_API_KEY"),
])
async def test_llm_errors_carry_a_reason_the_sidebar_acts_on(tmp_path, openai_server, status, reason, says):
    message = "The model `gpt-4o-mini` does not exist" if status == 404 else "Incorrect API key provided"
    openai_server.script(Turn.fail(status, message))
    app = await _app(tmp_path, openai_server)
    try:
        events = await _run(app, "hi")
        errors = [e for e in events if isinstance(e, Error) and e.reason != "notice"]
        assert [e.reason for e in errors] == [reason] and says in errors[0].message
        assert events[-1].reason == "error"
        assert not any(isinstance(e, Usage) for e in events)  # no call completed: nothing to count
        assert len(openai_server.chat_requests) == 1  # not retried: retrying cannot help
        if status == 404:  # the message names what the endpoint does serve (the fix for a guessed model)
            assert ("It serves: chain-a, chain-b, fallback-model, gpt-4o-mini. Set LLM_MODEL" in errors[0].message)
    finally:
        await app.close()
