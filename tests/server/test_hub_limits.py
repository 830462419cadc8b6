"""The hub limits through the HTTP API: the sidebar gets a 429 / 403 whose ``message`` it shows."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.openai_server import Turn
from tests.server.conftest import Api


@pytest.fixture
def astro_overrides(openai_server: Any) -> dict[str, Any]:
    return {"openai_base_url": openai_server.url, "openai_api_key": "k", "llm_model": "gpt-4o-mini",
            "max_runs_per_user": 1, "allowed_models": ["gpt-4o*", "chain-a"]}


async def test_a_run_past_the_cap_is_429_and_a_model_outside_the_list_is_403(api: Api, openai_server: Any,
                                                                             jp_fetch: Any) -> None:
    openai_server.respond_with(lambda body: Turn.call("ask_user", {"question": "Which band?"}))
    status, first = await api("POST", "astro/api/runs", body={"prompt": "ask me"})
    assert status == 201

    response = await jp_fetch("astro", "api", "runs", method="POST", body='{"prompt": "and this"}', raise_error=False)
    assert response.code == 429 and response.headers["Retry-After"] == "15"
    import json

    error = json.loads(response.body)
    assert error["reason"] == "too_many_runs"
    assert error["message"].startswith("you already have 1 run going and this hub allows 1 at once")

    status, err = await api("PUT", "astro/api/models/current", body={"model": "fallback-model"})
    assert status == 403 and err["reason"] == "model_not_allowed"
    assert "you may pick: gpt-4o-mini, gpt-4o*, chain-a" in err["message"]
    status, models = await api("GET", "astro/api/models")
    assert status == 200 and models["models"] == ["gpt-4o-mini", "chain-a"]

    status, cancelled = await api("POST", f"astro/api/runs/{first['run_id']}/cancel")
    assert status == 202
    status, _events = await api("GET", f"astro/api/runs/{first['run_id']}/events")  # ends with done
    openai_server.respond_with(lambda body: Turn.say("fine"))
    status, err = await api("POST", "astro/api/runs", body={"prompt": "again", "model": "fallback-model"})
    assert status == 403 and err["reason"] == "model_not_allowed"
    status, second = await api("POST", "astro/api/runs", body={"prompt": "again", "model": "chain-a"})
    assert status == 201, second
