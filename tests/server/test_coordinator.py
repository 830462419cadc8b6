"""Coordinator mode as a property of the session: PATCH it, read it back, and runs use it.

Runs go to the scripted OpenAI-compatible server (real ``openai`` client); the tool names
the runtime sent in each chat request show whether the coordinator meta-tools were offered.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.openai_server import Turn
from tests.server.conftest import Api


@pytest.fixture
def astro_overrides(openai_server: Any) -> dict[str, Any]:
    return {"openai_base_url": openai_server.url, "openai_api_key": "test-key"}


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or []}


async def _run(api: Api, sse: Any, openai_server: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Start a run over HTTP, wait for it to finish, return the chat request the LLM received."""
    openai_server.script(Turn.say("Done."))
    before = len(openai_server.chat_requests)
    status, started = await api("POST", "astro/api/runs", body=body)
    assert status == 201, started
    events = await sse(started["run_id"])
    assert events[-1][1]["type"] == "done" and events[-1][1]["reason"] == "finished"
    assert len(openai_server.chat_requests) == before + 1
    return {"session_id": started["session_id"], "request": openai_server.chat_requests[-1]}


async def test_patch_coordinator_is_stored_and_shown(api: Api) -> None:
    status, created = await api("POST", "astro/api/sessions", body={"title": "Cluster survey"})
    assert status == 201 and created["coordinator"] is False
    sid = created["id"]

    status, patched = await api("PATCH", "astro/api/sessions", sid, body={"coordinator": True})
    assert status == 200 and patched["coordinator"] is True and patched["title"] == "Cluster survey"
    status, one = await api("GET", "astro/api/sessions", sid)
    assert one["coordinator"] is True
    status, listed = await api("GET", "astro/api/sessions")
    assert [s["coordinator"] for s in listed["sessions"]] == [True]

    status, patched = await api("PATCH", "astro/api/sessions", sid, body={"coordinator": False, "title": "Survey"})
    assert status == 200 and patched["coordinator"] is False and patched["title"] == "Survey"
    status, one = await api("GET", "astro/api/sessions", sid)
    assert one["coordinator"] is False and one["title"] == "Survey"


async def test_bad_patch_bodies_are_json_errors_and_change_nothing(api: Api) -> None:
    status, created = await api("POST", "astro/api/sessions", body={"title": "Keep me"})
    sid = created["id"]
    for body in ({"coordinator": "yes"}, {"coordinator": 1}, {"coordinator": None}, {"title": "New", "coordinator": "on"}):
        status, err = await api("PATCH", "astro/api/sessions", sid, body=body)
        assert status == 400, body
        assert set(err) == {"message", "reason"} and "coordinator" in err["message"], err
    status, err = await api("PATCH", "astro/api/sessions", sid, body={})
    assert status == 400 and set(err) == {"message", "reason"} and "coordinator" in err["message"]
    status, err = await api("PATCH", "astro/api/sessions", sid, body={"title": 7, "coordinator": True})
    assert status == 400 and err["reason"] == "invalid_title"
    status, one = await api("GET", "astro/api/sessions", sid)
    assert one["title"] == "Keep me" and one["coordinator"] is False  # nothing half-applied
    status, err = await api("PATCH", "astro/api/sessions", "ses_missing", body={"coordinator": True})
    assert status == 404 and err["reason"] == "session_not_found"


async def test_run_without_flag_uses_the_sessions_mode(api: Api, sse: Any, openai_server: Any) -> None:
    status, created = await api("POST", "astro/api/sessions", body={"title": "Delegation"})
    sid = created["id"]

    plain = await _run(api, sse, openai_server, {"prompt": "hello", "session_id": sid})
    assert "delegate_task" not in _tool_names(plain["request"]) and "query_target" in _tool_names(plain["request"])

    await api("PATCH", "astro/api/sessions", sid, body={"coordinator": True})
    coord = await _run(api, sse, openai_server, {"prompt": "split this up", "session_id": sid})
    assert {"delegate_task", "check_task"} <= _tool_names(coord["request"])

    # an explicit value wins over the stored one, and becomes the session's mode
    explicit = await _run(api, sse, openai_server, {"prompt": "just answer", "session_id": sid, "coordinator": False})
    assert "delegate_task" not in _tool_names(explicit["request"])
    status, one = await api("GET", "astro/api/sessions", sid)
    assert one["coordinator"] is False
    again = await _run(api, sse, openai_server, {"prompt": "and again", "session_id": sid})
    assert "delegate_task" not in _tool_names(again["request"])

    # a run that makes its own session stores its explicit flag there
    fresh = await _run(api, sse, openai_server, {"prompt": "new one", "coordinator": True})
    assert "delegate_task" in _tool_names(fresh["request"])
    status, one = await api("GET", "astro/api/sessions", fresh["session_id"])
    assert one["coordinator"] is True


async def test_bad_coordinator_in_run_request(api: Api) -> None:
    status, created = await api("POST", "astro/api/sessions", body={})
    status, err = await api("POST", "astro/api/runs", body={"prompt": "hi", "session_id": created["id"], "coordinator": "true"})
    assert status == 400 and set(err) == {"message", "reason"} and "coordinator" in err["message"]
    status, one = await api("GET", "astro/api/sessions", created["id"])
    assert one["coordinator"] is False and one["runs"] == []
