"""Without an LLM endpoint the server still serves history, and a run ends with a clear error."""

from __future__ import annotations

import json
from typing import Any

from tests.server.conftest import Api


async def test_run_without_llm_ends_with_a_clear_error(api: Api, jp_fetch: Any) -> None:
    status, started = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
    assert status == 201
    response = await jp_fetch("astro", "api", "runs", started["run_id"], "events", request_timeout=30)
    events = [json.loads(line[6:]) for line in response.body.decode().splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events][0] == "session"
    error = next(e for e in events if e["type"] == "error" and e["reason"] != "notice")  # not the root notice
    assert error["reason"] in ("llm_unavailable", "config") and "OPENAI" in error["message"].upper()
    assert events[-1] == {"type": "done", "session_id": started["session_id"], "run_id": started["run_id"], "reason": "error"}
    status, msgs = await api("GET", "astro/api/sessions", started["session_id"], "messages")
    assert [m["content"] for m in msgs["messages"]] == ["Where is M 87?"]  # the prompt is kept for a retry
    status, models = await api("GET", "astro/api/models")
    assert status == 200 and models["source"] == "none" and "OPENAI_API_KEY" in models["warning"]
