"""``astro/api/models``: the endpoint's list, the unreachable case, switching at run time."""

from __future__ import annotations

from typing import Any

import pytest

from astro_jupyter.services.container import Tuning
from tests.agent.runtime_helpers import fast
from tests.fakes.openai_server import Turn
from tests.server.conftest import Api


@pytest.fixture
def astro_overrides(openai_server) -> dict[str, Any]:
    return {"openai_base_url": openai_server.url, "openai_api_key": "k", "llm_model": "gpt-4o-mini",
            "llm_fallback_model": "fallback-model"}


async def test_models_list_and_switch_used_by_the_next_run(api: Api, openai_server: Any) -> None:
    status, models = await api("GET", "astro/api/models")
    assert status == 200
    assert models["current"] == "gpt-4o-mini" and models["source"] == "endpoint" and models["warning"] is None, models["warning"]
    assert set(models["models"]) == {"gpt-4o-mini", "fallback-model", "chain-a", "chain-b"}
    assert models["configured"] == ["gpt-4o-mini", "fallback-model"]

    status, switched = await api("PUT", "astro/api/models/current", body={"model": "chain-a"})
    assert status == 200 and switched == {"current": "chain-a", "previous": "gpt-4o-mini"}
    status, models = await api("GET", "astro/api/models")
    assert models["current"] == "chain-a"

    openai_server.script(Turn.say("Hello."))
    status, started = await api("POST", "astro/api/runs", body={"prompt": "hi"})
    assert status == 201
    status, _ = await api("GET", f"astro/api/runs/{started['run_id']}/events")
    assert openai_server.models_requested() == ["chain-a"]

    for bad in ({"model": ""}, {"model": 3}, {}):
        status, err = await api("PUT", "astro/api/models/current", body=bad)
        assert status == 400 and err["reason"] == "invalid_model"
    status, err = await api("PUT", "astro/api/models/current", raw=b"nope")
    assert status == 400 and err["reason"] == "invalid_json"
    # a name the endpoint does not list is refused at once, with the names it does list
    status, err = await api("PUT", "astro/api/models/current", body={"model": "gpt-4o-mni"})
    assert status == 400 and err["reason"] == "unknown_model"
    assert err["message"] == ("the LLM endpoint has no model named 'gpt-4o-mni'; it lists: "
                              "chain-a, chain-b, fallback-model, gpt-4o-mini")
    status, models = await api("GET", "astro/api/models")
    assert models["current"] == "chain-a"  # unchanged


class TestUnreachableEndpoint:
    @pytest.fixture
    def astro_overrides(self) -> dict[str, Any]:
        return {"openai_base_url": "http://127.0.0.1:9/v1", "openai_api_key": "k", "llm_model": "m-main",
                "llm_fallback_model": "m-fallback", "llm_fallback_chain": ["m-c"]}

    @pytest.fixture
    def astro_tuning(self) -> Tuning:
        return fast({"max_retries": 0})

    async def test_configured_models_and_a_warning(self, api: Api) -> None:
        status, models = await api("GET", "astro/api/models")
        assert status == 200 and models["source"] == "config"
        assert models["models"] == ["m-main", "m-fallback", "m-c"] and models["current"] == "m-main"
        assert models["warning"] and "model" in models["warning"]
        # an endpoint that cannot be asked cannot refuse a name: it is taken as given
        status, switched = await api("PUT", "astro/api/models/current", body={"model": "m-other"})
        assert status == 200 and switched["current"] == "m-other"
