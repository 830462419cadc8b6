"""Sessions, messages and history search through the real handlers."""

from __future__ import annotations

import pytest

from tests.server.conftest import Api


async def test_session_lifecycle(api: Api, astro_service) -> None:
    status, created = await api("POST", "astro/api/sessions", body={"title": "  Andromeda   distance "})
    assert status == 201
    sid = created["id"]
    assert created["title"] == "Andromeda distance" and created["active_run_id"] is None

    status, listed = await api("GET", "astro/api/sessions")
    assert status == 200 and [s["id"] for s in listed["sessions"]] == [sid]

    status, renamed = await api("PATCH", "astro/api/sessions", sid, body={"title": "M 31 distance"})
    assert status == 200 and renamed["title"] == "M 31 distance"

    status, one = await api("GET", "astro/api/sessions", sid)
    assert status == 200 and one["title"] == "M 31 distance" and one["runs"] == []

    await astro_service.services.messages.append(sid, {"role": "user", "content": "How far is M 31?"})
    await astro_service.services.messages.append(sid, {"role": "assistant", "content": "About 765 kpc."})
    status, msgs = await api("GET", "astro/api/sessions", sid, "messages")
    assert status == 200 and [m["content"] for m in msgs["messages"]] == ["How far is M 31?", "About 765 kpc."]
    await astro_service.services.messages.append(sid, {"role": "user", "content": "And M 33?"})
    status, listed = await api("GET", "astro/api/sessions")
    assert [s["turns"] for s in listed["sessions"]] == [2]  # the sidebar's "2 turns": prompts, not replies
    assert listed["sessions"][0]["last_model"] == ""  # no run yet
    await astro_service.services.runs.create("run_a", sid, owner="", prompt="How far is M 31?", model="model-one")
    await astro_service.services.runs.create("run_b", sid, owner="", prompt="And M 33?", model="model-two")
    status, listed = await api("GET", "astro/api/sessions")
    assert listed["sessions"][0]["last_model"] == "model-two"  # the latest run's

    status, _ = await api("DELETE", "astro/api/sessions", sid)
    assert status == 204
    status, err = await api("GET", "astro/api/sessions", sid)
    assert status == 404 and err["reason"] == "session_not_found"
    status, listed = await api("GET", "astro/api/sessions")
    assert listed["sessions"] == []
    assert await astro_service.services.messages.list(sid) == []


async def test_bad_session_requests_get_json_errors(api: Api) -> None:
    status, err = await api("POST", "astro/api/sessions", raw=b"{not json")
    assert status == 400 and err["reason"] == "invalid_json" and "not valid JSON" in err["message"]
    status, err = await api("POST", "astro/api/sessions", raw=b"[1, 2]")
    assert status == 400 and err["reason"] == "invalid_json"
    status, err = await api("POST", "astro/api/sessions", body={"title": 42})
    assert status == 400 and err["reason"] == "invalid_title"
    status, err = await api("PATCH", "astro/api/sessions", "ses_missing", body={"title": "x"})
    assert status == 404 and err == {"message": "no session 'ses_missing'", "reason": "session_not_found"}
    status, err = await api("DELETE", "astro/api/sessions", "ses_missing")
    assert status == 404 and err["reason"] == "session_not_found"
    status, err = await api("GET", "astro/api/sessions", "ses_missing", "messages")
    assert status == 404
    status, err = await api("GET", "astro/api/sessions", params={"limit": "lots"})
    assert status == 400 and err["reason"] == "invalid_argument"


async def test_history_search_with_snippets(api: Api, astro_service) -> None:
    services = astro_service.services
    await astro_service.start()
    a = await services.sessions.create(title="Quasar variability")
    b = await services.sessions.create(title="Other things")
    await services.messages.append(a.id, {"role": "user", "content": "What drives the variability of quasar light curves?"})
    await services.messages.append(b.id, {"role": "user", "content": "Tell me about galaxy clusters and quasar hosts."})
    await services.messages.append(b.id, {"role": "user", "content": "Unrelated text about dust."})

    status, found = await api("GET", "astro/api/search/history", params={"q": "quasar"})
    assert status == 200 and found["query"] == "quasar"
    sessions = {r["session_id"] for r in found["results"]}
    assert sessions == {a.id, b.id}
    message_hits = [r for r in found["results"] if r["message_id"] is not None]
    assert all("«quasar»" in r["snippet"].lower() for r in message_hits)
    assert all("<mark>" in r["snippet_html"] for r in found["results"])

    status, scoped = await api("GET", "astro/api/search/history", params={"q": "quasar", "session_id": b.id})
    assert status == 200 and {r["session_id"] for r in scoped["results"]} == {b.id}

    status, none = await api("GET", "astro/api/search/history", params={"q": "M31 - halo AND"})
    assert status == 200 and none["results"] == []  # FTS5 syntax in user text is not an error

    status, err = await api("GET", "astro/api/search/history")
    assert status == 400 and err["reason"] == "missing_query"
    status, err = await api("GET", "astro/api/search/history", params={"q": "x", "session_id": "ses_nope"})
    assert status == 404 and err["reason"] == "session_not_found"


class TestInvalidConfiguration:
    @pytest.fixture
    def astro_overrides(self) -> dict:
        return {"permission_rules": [{"action": "maybe", "tool": "run_bash"}]}

    async def test_routes_explain_the_configuration_error(self, api: Api) -> None:
        status, err = await api("GET", "astro/api/sessions")
        assert status == 503 and err["reason"] == "config"
        assert "action must be allow, deny or ask" in err["message"]


async def test_sessions_show_the_model_they_ran_with(api: Api, sse, astro_service, openai_server) -> None:
    from tests.fakes.openai_server import Turn

    status, created = await api("POST", "astro/api/sessions", body={"title": "Model shown"})
    assert created["model"] == ""
    for body in ({"prompt": "hello", "session_id": created["id"]}, {"prompt": "again", "session_id": created["id"], "model": "other-model"}):
        openai_server.script(Turn.say("Done."))
        status, started = await api("POST", "astro/api/runs", body=body)
        assert status == 201, started
        assert (await sse(started["run_id"]))[-1][1]["type"] == "done"
    status, one = await api("GET", "astro/api/sessions", created["id"])
    assert one["model"] == "other-model"
    assert [r["model"] for r in one["runs"]] == [astro_service.services.config.llm_model, "other-model"]
    status, listed = await api("GET", "astro/api/sessions")
    assert [s["model"] for s in listed["sessions"]] == ["other-model"]


async def test_history_search_more_results(api: Api, astro_service) -> None:
    services = astro_service.services
    await astro_service.start()
    s = await services.sessions.create(title="Cepheid work")
    ids = [await services.messages.append(s.id, {"role": "user", "content": f"the cepheid note {i}"}) for i in range(25)]
    status, first = await api("GET", "astro/api/search/history", params={"q": "cepheid notes", "limit": "10"})
    assert status == 200 and len(first["results"]) == 10 and first["next_cursor"]
    assert first["window"] == astro_service.services.history.window
    seen = [r["message_id"] for r in first["results"]]
    reply = first
    while reply["next_cursor"]:
        status, reply = await api("GET", "astro/api/search/history", params={"q": "cepheid notes", "limit": "10", "cursor": reply["next_cursor"]})
        assert status == 200
        seen += [r["message_id"] for r in reply["results"]]
    assert sorted(seen) == ids and len(reply["results"]) == 5

    status, err = await api("GET", "astro/api/search/history", params={"q": "cepheid", "cursor": "garbage"})
    assert status == 400 and err["reason"] == "invalid_cursor" and "cursor" in err["message"]
    status, err = await api("GET", "astro/api/search/history", params={"q": "cepheid", "cursor": first["next_cursor"]})
    assert status == 400 and err["reason"] == "invalid_cursor" and "different search" in err["message"]
