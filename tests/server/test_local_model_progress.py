"""Over the server API a long tool call from a slow local model shows progress while it is written
(``tool_call_preparing`` on the run's SSE stream before the ``tool_call``), from a run in the agent host."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from tests.fakes.openai_server import Turn
from tests.server.conftest import Api


@pytest.fixture
def astro_overrides(openai_server: Any) -> dict[str, Any]:
    return {"openai_base_url": openai_server.url, "openai_api_key": "test-key", "service_urls": {"sesame": "http://127.0.0.1:9"}}


async def test_a_call_being_written_streams_progress_before_it_arrives(api: Api, live_url: Any,
                                                                      jp_auth_header: dict[str, str],
                                                                      openai_server: Any) -> None:
    openai_server.script(
        Turn.call("query_target", {"name": "M 31", "why": "a long reason " * 200}, chunk_size=60, delay=0.01),
        Turn.say("done"),
    )
    status, started = await api("POST", "astro/api/runs", body={"prompt": "M 31?"})
    assert status == 201
    seen: list[dict[str, Any]] = []
    async with httpx2.AsyncClient(timeout=60) as client:
        async with client.sse(live_url(f"astro/api/runs/{started['run_id']}/events"), headers=jp_auth_header) as source:
            async for message in source:
                event = json.loads(message.data) if message.data else {}
                seen.append(event)
                if event.get("type") == "done":
                    break
    kinds = [e.get("type") for e in seen]
    assert "tool_call_preparing" in kinds and kinds.index("tool_call_preparing") < kinds.index("tool_call")
    first = next(e for e in seen if e.get("type") == "tool_call_preparing")
    assert first["name"] == "query_target" and first["step"] == 1
    assert seen[-1]["reason"] == "finished"
