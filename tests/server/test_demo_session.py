"""The demo's recorded session opens without an LLM endpoint: POST astro/api/sessions/demo imports it
for the caller (once), and its stored events replay like any reopened session's."""

from __future__ import annotations

from astro_jupyter.demo import DEMO_SESSION_TITLE, recorded_session
from tests.server.conftest import Api


async def test_demo_session_opens_without_an_endpoint_and_replays(api: Api) -> None:
    status, models = await api("GET", "astro/api/models")
    assert status == 200 and models["source"] == "none"  # what the sidebar's empty state keys on

    status, session = await api("POST", "astro/api/sessions/demo")
    assert status == 200, session
    sid = session["id"]
    assert session["title"] == DEMO_SESSION_TITLE

    status, page = await api("GET", "astro/api/sessions", sid, "events")
    assert status == 200
    events = [e["event"] for e in page["events"]]
    types = [e["type"] for e in events]
    assert types[0] == "session" and types[-1] == "done" and "tool_call" in types and "tool_result" in types
    assert events[0]["session_id"] == sid and events[-1] == {
        "type": "done", "session_id": sid, "run_id": page["events"][0]["run_id"], "reason": "finished"}
    answer = "".join(e["delta"] for e in events if e["type"] == "text_delta")
    recorded = recorded_session()
    assert recorded["messages"][-1]["content"] in answer  # the recorded answer, not a summary of it

    status, msgs = await api("GET", "astro/api/sessions", sid, "messages")
    assert [m["role"] for m in msgs["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert msgs["messages"][0]["content"] == recorded["prompt"]

    # asking again opens the same session: one demo per user, not a new copy per click
    status, again = await api("POST", "astro/api/sessions/demo")
    assert status == 200 and again["id"] == sid
    status, listed = await api("GET", "astro/api/sessions")
    assert [s["id"] for s in listed["sessions"] if s["title"] == DEMO_SESSION_TITLE] == [sid]


async def test_other_methods_on_the_demo_route_are_refused(api: Api) -> None:
    status, _ = await api("DELETE", "astro/api/sessions/demo")
    assert status == 405


def test_every_recorded_event_is_a_wire_event() -> None:
    from astro_jupyter.events import from_wire

    for event in recorded_session()["events"]:
        from_wire(event)  # raises on an unknown type or a missing field
