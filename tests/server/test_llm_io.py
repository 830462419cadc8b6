"""The Jupyter server reads LLM streams in its I/O process (``AstroConfig.llm_io`` 'auto'), so
the tokens of many runs do not compete with requests for the server's interpreter; an explicit
setting is kept."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from astro_jupyter.app import AstroApp
from astro_jupyter.llm.io_process import LLM_PROCESS
from tests.fakes.openai_server import Turn
from tests.server.conftest import Api


@pytest.fixture
def astro_overrides(request: pytest.FixtureRequest, openai_server: Any) -> dict[str, Any]:
    return {"openai_base_url": openai_server.url, "openai_api_key": "test-key", **getattr(request, "param", {})}


async def _answer(api: Api, live_url: Any, jp_auth_header: dict[str, str], prompt: str) -> str:
    status, started = await api("POST", "astro/api/runs", body={"prompt": prompt})
    assert status == 201
    text = ""
    async with httpx2.AsyncClient(timeout=30) as client:
        async with client.sse(live_url(f"astro/api/runs/{started['run_id']}/events"), headers=jp_auth_header) as source:
            async for message in source:
                event = json.loads(message.data) if message.data else {}
                if event.get("type") == "text_delta":
                    text += event["delta"]
                elif event.get("type") == "done":
                    break
    return text


@pytest.mark.parametrize(
    ("astro_overrides", "mode"),
    [({}, "process"), ({"llm_io": "thread"}, "thread")],
    indirect=["astro_overrides"],
    ids=["auto-is-process", "explicit-thread-kept"],
)
async def test_where_the_server_reads_streams(api: Api, live_url: Any, jp_auth_header: dict[str, str],
                                              openai_server: Any, astro_service: AstroApp,
                                              monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    from astro_jupyter.llm import shape

    parsed_here: list[Any] = []
    real = shape.read_chunk
    monkeypatch.setattr("astro_jupyter.llm.client.read_chunk", lambda c: parsed_here.append(c) or real(c))
    openai_server.script(Turn.say("Vega is an A0 V star.", chunk_size=3))
    assert astro_service.config.llm_io == mode
    assert await _answer(api, live_url, jp_auth_header, "What type is Vega?") == "Vega is an A0 V star."
    if mode == "process":
        assert parsed_here == [] and LLM_PROCESS.pid is not None  # every chunk was read in the helper
    else:
        assert parsed_here  # read on this process's I/O thread
