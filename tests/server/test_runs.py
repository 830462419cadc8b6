"""Runs over HTTP: start, stream as SSE with a real client, resume, cancel, answer, bad input.

The run uses the scripted OpenAI-compatible server (real ``openai`` client) making a
``query_target`` call answered by the fake CDS Sesame (real ``httpx2``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest

from astro_jupyter.server.base import SERVICE_KEY
from astro_jupyter.agent.run import RunLocks
from astro_jupyter.app import AstroApp
from astro_jupyter.server.sse import SsePacing
from tests.fakes.openai_server import Turn
from tests.waiting import until
from tests.server.conftest import Api

Event = tuple[int, dict[str, Any]]


@pytest.fixture
def astro_overrides(openai_server, sesame_server) -> dict[str, Any]:
    return {
        "openai_base_url": openai_server.url,
        "openai_api_key": "test-key",
        "service_urls": {"sesame": sesame_server.url},
    }


@pytest.fixture
def sse_pacing() -> SsePacing:
    return SsePacing(keepalive_secs=0.2)


def _script_tool_run(openai_server: Any) -> None:
    openai_server.script(
        Turn.call("query_target", {"name": "M 87"}, id="call_1", text="Looking it up. "),
        Turn.say("M 87 is at RA 187.7059 deg, Dec +12.3911 deg.", chunk_size=5),
    )


def _types(events: list[Event]) -> list[str]:
    return [e["type"] for _, e in events]


async def test_run_streams_to_done_and_resumes(api: Api, sse: Any, openai_server: Any, astro_service: AstroApp,
                                               jp_serverapp: Any) -> None:
    _script_tool_run(openai_server)
    status, started = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
    assert status == 201 and set(started) == {"run_id", "session_id"}
    run_id = started["run_id"]

    events = await sse(run_id)
    seqs = [s for s, _ in events]
    assert seqs == list(range(1, len(events) + 1))
    kinds = _types(events)
    assert kinds[0] == "session" and kinds[-1] == "done"
    call = next(e for _, e in events if e["type"] == "tool_call")
    result = next(e for _, e in events if e["type"] == "tool_result")
    assert call["name"] == "query_target" and call["arguments"] == {"name": "M 87"}
    assert result["tool_call_id"] == "call_1" and not result["is_error"] and "12:30:49" in result["output"]
    assert events[-1][1] == {"type": "done", "session_id": started["session_id"], "run_id": run_id, "reason": "finished"}

    # after the run: resume from any id, by header or query, with nothing lost or repeated
    k = len(events) // 2
    assert await sse(run_id, last_event_id=k) == events[k:]
    assert await sse(run_id, query=k + 1) == events[k + 1:]
    status, body = await api("GET", f"astro/api/runs/{run_id}/events", headers={"Last-Event-ID": str(len(events))})
    assert status == 204 and body is None  # everything seen: 204 tells EventSource to stop reconnecting

    # the session now lists the run and its messages
    status, session = await api("GET", "astro/api/sessions", started["session_id"])
    assert status == 200 and [r["id"] for r in session["runs"]] == [run_id] and session["runs"][0]["status"] == "finished"
    status, msgs = await api("GET", "astro/api/sessions", started["session_id"], "messages")
    assert [m["role"] for m in msgs["messages"]] == ["user", "assistant", "tool", "assistant"]

    # restart the extension's service: the run now exists only in the store, and still replays
    await astro_service.close()
    fresh = AstroApp(astro_service.config, serve=True)
    jp_serverapp.web_app.settings[SERVICE_KEY] = fresh
    try:
        assert fresh.live_run(run_id) is None
        assert await sse(run_id) == events
        assert await sse(run_id, last_event_id=3) == events[3:]
    finally:
        await fresh.close()


async def test_resume_mid_run_two_clients_and_disconnect(api: Api, sse: Any, openai_server: Any,
                                                         sesame_server: Any, astro_service: AstroApp) -> None:
    sesame_server.state["delay"] = 1.0  # the tool takes a second: the run is mid-tool when we drop
    _script_tool_run(openai_server)
    status, started = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
    run_id = started["run_id"]

    full_task = asyncio.ensure_future(sse(run_id))  # a second tab watching the whole run
    first = await sse(run_id, until=lambda ev: ev[-1][1]["type"] == "tool_call")
    assert astro_service.active_run_id(started["session_id"]) == run_id  # our disconnect did not stop the run

    raw: list[str] = []
    rest = await sse(run_id, last_event_id=first[-1][0], raw=raw)
    full = await full_task
    assert first + rest == full
    assert [s for s, _ in full] == list(range(1, len(full) + 1))
    assert _types(full)[-1] == "done" and full[-1][1]["reason"] == "finished"
    status, session = await api("GET", "astro/api/sessions", started["session_id"])
    assert session["runs"][0]["status"] == "finished"
    # stored events are the ones streamed, once the agent host says the run has ended (its last batch of
    # events is written then; the stream may show "done" a moment earlier)
    await until(lambda: run_id not in astro_service.host.runs, "the host to finish the run")
    stored = await astro_service.services.runs.events_after(run_id)
    assert [(s, d) for s, d in stored] == full


async def test_keepalive_comments_while_a_tool_runs(api: Api, live_url: Any, jp_auth_header: Any,
                                                    openai_server: Any, sesame_server: Any) -> None:
    sesame_server.state["delay"] = 1.0
    _script_tool_run(openai_server)
    status, started = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
    chunks: list[str] = []
    async with httpx2.AsyncClient(timeout=30) as client:
        async with client.stream("GET", live_url(f"astro/api/runs/{started['run_id']}/events"), headers=jp_auth_header) as response:
            async for text in response.aiter_text():
                chunks.append(text)
    body = "".join(chunks)
    assert body.count(": keep-alive\n\n") >= 2  # keepalive every 0.2 s during the 1 s tool call
    assert body.rstrip().endswith('"reason":"finished"}')


async def test_cancel_mid_tool(api: Api, sse: Any, openai_server: Any, sesame_server: Any, astro_service: AstroApp) -> None:
    sesame_server.state["delay"] = 5.0
    _script_tool_run(openai_server)
    status, started = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
    run_id = started["run_id"]
    await sse(run_id, until=lambda ev: ev[-1][1]["type"] == "tool_call")
    status, answer = await api("POST", "astro/api/runs", run_id, "cancel")
    assert status == 202 and answer == {"run_id": run_id, "status": "cancelling"}
    events = await sse(run_id)
    (result,) = [e for _, e in events if e["type"] == "tool_result"]
    assert result["is_error"] and "cancelled" in result["output"]  # the 5 s lookup was stopped, not waited for
    assert events[-1][1]["type"] == "done" and events[-1][1]["reason"] == "cancelled"
    status, again = await api("POST", "astro/api/runs", run_id, "cancel")
    assert status == 202 and again["status"] == "cancelled"
    run = await astro_service.services.runs.get(run_id)
    assert run.status == "cancelled"


async def test_bad_run_requests(api: Api, sse: Any, openai_server: Any, sesame_server: Any) -> None:
    for raw, reason in ((b"{nope", "invalid_json"), (b'"just a string"', "invalid_json"), (b"", "invalid_json")):
        status, err = await api("POST", "astro/api/runs", raw=raw)
        assert status == 400 and err["reason"] == reason, (raw, err)
    status, err = await api("POST", "astro/api/runs", body={"prompt": ""})
    assert status == 400 and err["reason"] == "invalid_prompt"
    status, err = await api("POST", "astro/api/runs", body={"prompt": "hi", "session_id": "ses_nope"})
    assert status == 404 and err["reason"] == "session_not_found"
    for steps in (0, 201, "5", True):  # the app's 1..200 rule, before any host is asked
        status, err = await api("POST", "astro/api/runs", body={"prompt": "hi", "max_steps": steps})
        assert status == 400 and err["reason"] == "invalid_max_steps", (steps, err)
    status, err = await api("POST", "astro/api/runs", body={"prompt": "hi", "coordinator": "yes"})
    assert status == 400
    for path in ("astro/api/runs/run_nope/events", ):
        status, err = await api("GET", path)
        assert status == 404 and err == {"message": "no run 'run_nope'", "reason": "run_not_found"}
    status, err = await api("POST", "astro/api/runs/run_nope/cancel")
    assert status == 404 and err["reason"] == "run_not_found"
    status, err = await api("POST", "astro/api/runs/run_nope/answers", body={"request_id": "r", "answer": "allow"})
    assert status == 404

    # a second run in a session that has one going: 409, and the first run is untouched
    sesame_server.state["delay"] = 1.0
    _script_tool_run(openai_server)
    status, first = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
    status, err = await api("POST", "astro/api/runs", body={"prompt": "and M 31?", "session_id": first["session_id"]})
    assert status == 409 and err["reason"] == "run_conflict"
    status, err = await api("DELETE", "astro/api/sessions", first["session_id"])
    assert status == 409 and err["reason"] == "run_conflict"
    status, session = await api("GET", "astro/api/sessions", first["session_id"])
    assert session["active_run_id"] == first["run_id"]  # a second tab finds the running run
    status, err = await api("GET", f"astro/api/runs/{first['run_id']}/events", headers={"Last-Event-ID": "abc"})
    assert status == 400 and err["reason"] == "invalid_event_id"
    events = await sse(first["run_id"])
    assert events[-1][1]["reason"] == "finished"
    status, err = await api("POST", "astro/api/runs", first["run_id"], "answers", body={"request_id": "r", "answer": "x"})
    assert status == 409 and err["reason"] == "run_conflict"


async def test_ask_user_answered_over_http(api: Api, sse: Any, openai_server: Any) -> None:
    openai_server.script(
        Turn.call("ask_user", {"question": "Which galaxy, M 31 or M 33?", "options": ["M 31", "M 33"]}, id="ask_1"),
        Turn.say("Then M 33 it is."),
    )
    status, started = await api("POST", "astro/api/runs", body={"prompt": "Pick a galaxy with me"})
    run_id = started["run_id"]
    asked = await sse(run_id, until=lambda ev: ev[-1][1]["type"] == "ask_user")
    question = asked[-1][1]
    assert question["question"] == "Which galaxy, M 31 or M 33?" and question["options"] == ["M 31", "M 33"]
    status, err = await api("POST", "astro/api/runs", run_id, "answers", body={"request_id": "req_other", "answer": "M 33"})
    assert status == 404 and err["reason"] == "request_not_found"
    status, ok = await api("POST", "astro/api/runs", run_id, "answers", body={"request_id": question["request_id"], "answer": "M 33"})
    assert status == 200 and ok["accepted"]
    events = await sse(run_id, last_event_id=asked[-1][0])
    result = next(e for _, e in events if e["type"] == "tool_result")
    assert result["tool_call_id"] == "ask_1" and "M 33" in result["output"] and not result["is_error"]
    assert events[-1][1]["reason"] == "finished"


async def test_stored_run_without_done_gets_one(api: Api, sse: Any, astro_service: AstroApp) -> None:
    """A run a dead process left behind (events stored, no done) replays and ends with an unstored done."""
    await astro_service.start()
    services = astro_service.services
    session = await services.sessions.create(title="crashed")
    await services.runs.create("run_crashed", session.id, prompt="hi")
    await services.runs.append_events("run_crashed", [
        (1, {"type": "session", "session_id": session.id, "run_id": "run_crashed", "title": "", "model": ""}),
        (2, {"type": "text_delta", "delta": "Hel", "step": 1}),
    ])
    await services.runs.finish("run_crashed", "error")
    events = await sse("run_crashed")
    assert [s for s, _ in events] == [1, 2, 3]
    assert events[-1][1] == {"type": "done", "session_id": session.id, "run_id": "run_crashed", "reason": "error"}
    assert await sse("run_crashed", last_event_id=2) == events[2:]
    status, _ = await api("GET", "astro/api/runs/run_crashed/events", headers={"Last-Event-ID": "3"})
    assert status == 204
    # a client past every stored id (ids a dead process sent, never stored) still gets the end, after its id
    assert await sse("run_crashed", last_event_id=99) == [(100, events[-1][1])]


async def test_follows_a_run_of_another_process_through_the_store(api: Api, sse: Any, astro_service: AstroApp) -> None:
    """A kernel's run (same SQLite file, other process) streams to the sidebar as its events land.

    The kernel holds the run's lock as a real one does: without it the agent host, started by the
    sidebar's first call, would rightly close the run as left behind by a dead process."""
    await astro_service.start()
    services = astro_service.services
    kernel_locks = RunLocks(astro_service.config.home_path / ".run-locks")
    assert kernel_locks.acquire("run_kernel")
    session = await services.sessions.create(title="from a notebook")
    await services.runs.create("run_kernel", session.id, prompt="hi")
    await services.runs.append_events("run_kernel", [(1, {"type": "session", "session_id": session.id, "run_id": "run_kernel"})])
    raw: list[str] = []
    reader = asyncio.ensure_future(sse("run_kernel", raw=raw))
    await until(lambda: any('"session"' in r for r in raw), "the stored first event")
    assert not reader.done()  # the row says running: the reader keeps following
    await services.runs.append_events("run_kernel", [(2, {"type": "text_delta", "delta": "Hi.", "step": 1})])
    await until(lambda: any("Hi." in r for r in raw), "the event stored after the reader started")
    assert not reader.done()
    await services.runs.append_events("run_kernel", [(3, {"type": "done", "session_id": session.id, "run_id": "run_kernel", "reason": "finished"})])
    await services.runs.finish("run_kernel", "finished")
    events = await asyncio.wait_for(reader, 10)
    kernel_locks.release("run_kernel")
    assert [(s, e["type"]) for s, e in events] == [(1, "session"), (2, "text_delta"), (3, "done")]


async def test_stopping_the_extension_cancels_runs_and_closes_the_store(
    api: Api, sse: Any, openai_server: Any, sesame_server: Any, astro_service: AstroApp, jp_serverapp: Any
) -> None:
    from astro_jupyter.services.container import ServiceContainer

    sesame_server.state["delay"] = 5.0
    _script_tool_run(openai_server)
    status, started = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
    await sse(started["run_id"], until=lambda ev: ev[-1][1]["type"] == "tool_call")
    (app,) = jp_serverapp.extension_manager.extension_apps["astro_jupyter"]
    await asyncio.wait_for(app.stop_extension(), 10)
    with pytest.raises(RuntimeError):
        astro_service.services.db  # closed
    services = ServiceContainer(astro_service.config)
    await services.start()
    try:
        run = await services.runs.get(started["run_id"])
        stored = await services.runs.events_after(started["run_id"])
    finally:
        await services.close()
    assert run.status == "cancelled" and stored[-1][1]["type"] == "done" and stored[-1][1]["reason"] == "cancelled"


async def test_export_a_run_session_as_notebook(api: Api, sse: Any, openai_server: Any, jp_fetch: Any) -> None:
    import importlib.util

    import nbformat

    if importlib.util.find_spec("astro_jupyter.export") is None:
        pytest.skip("astro_jupyter/export.py is not installed")
    _script_tool_run(openai_server)
    status, started = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
    await sse(started["run_id"])
    response = await jp_fetch("astro", "api", "sessions", started["session_id"], "export")
    assert response.code == 200
    assert response.headers["Content-Type"].startswith("application/x-ipynb+json")
    assert 'filename="Where-is-M-87.ipynb"' in response.headers["Content-Disposition"]
    notebook = nbformat.reads(response.body.decode(), as_version=4)
    nbformat.validate(notebook)
    sources = "\n".join(c.source for c in notebook.cells)
    assert "Where is M 87?" in sources and "%astro query_target" in sources
    assert "M 87 is at RA 187.7059 deg" in sources


class TestPermissionAnswers:
    @pytest.fixture
    def astro_overrides(self, openai_server, sesame_server) -> dict[str, Any]:
        return {
            "openai_base_url": openai_server.url,
            "openai_api_key": "test-key",
            "service_urls": {"sesame": sesame_server.url},
            "permission_mode": "ask",
            "permission_rules": [{"action": "ask", "tool": "query_target"}],
        }

    async def test_allow_then_deny(self, api: Api, sse: Any, openai_server: Any) -> None:
        _script_tool_run(openai_server)
        status, started = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
        run_id = started["run_id"]
        asked = await sse(run_id, until=lambda ev: ev[-1][1]["type"] == "permission_request")
        request = asked[-1][1]
        assert request["name"] == "query_target" and request["arguments"] == {"name": "M 87"}
        status, err = await api("POST", "astro/api/runs", run_id, "answers", body={"request_id": request["request_id"]})
        assert status == 400  # no answer given
        status, ok = await api("POST", "astro/api/runs", run_id, "answers",
                               body={"request_id": request["request_id"], "answer": "allow"})
        assert status == 200 and ok["accepted"] is True
        status, err = await api("POST", "astro/api/runs", run_id, "answers",
                                body={"request_id": request["request_id"], "answer": "allow"})
        assert status in (404, 409)  # already answered (or the run already ended)
        events = await sse(run_id, last_event_id=asked[-1][0])
        result = next(e for _, e in events if e["type"] == "tool_result")
        assert not result["is_error"] and "12:30:49" in result["output"]
        assert events[-1][1]["reason"] == "finished"

        openai_server.script(
            Turn.call("query_target", {"name": "M 31"}, id="call_2"),
            Turn.say("I was not allowed to look it up."),
        )
        status, second = await api("POST", "astro/api/runs", body={"prompt": "And M 31?", "session_id": started["session_id"]})
        asked = await sse(second["run_id"], until=lambda ev: ev[-1][1]["type"] == "permission_request")
        status, _ = await api("POST", "astro/api/runs", second["run_id"], "answers",
                              body={"request_id": asked[-1][1]["request_id"], "answer": "deny"})
        assert status == 200
        events = await sse(second["run_id"], last_event_id=asked[-1][0])
        result = next(e for _, e in events if e["type"] == "tool_result")
        assert result["is_error"]
        assert events[-1][1]["reason"] == "finished"
        # the answer is part of the record, right after the question: other tabs close the question
        # live, and a reopened session shows "deny" rather than "no longer waiting"
        answered = [e for _, e in events if e["type"] == "question_answered"]
        assert answered == [{"type": "question_answered", "request_id": asked[-1][1]["request_id"], "answer": "deny"}]
        status, page = await api("GET", f"astro/api/sessions/{started['session_id']}/events")
        stored = [e["event"] for e in page["events"] if e["event"]["type"] == "question_answered"]
        assert [(e["request_id"], e["answer"]) for e in stored] == [
            (request["request_id"], "allow"), (asked[-1][1]["request_id"], "deny")]


async def test_session_history_is_the_session_brief_messages_and_every_event_in_small_parts(
        api: Api, sse: Any, openai_server: Any, jp_fetch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``GET sessions/{id}/history``: what a reopened sidebar rebuilds from, in one reply of JSON
    lines: the session, its messages without tool output, then the same events as the events route."""
    import json

    from astro_jupyter.app import sessions as app_sessions

    monkeypatch.setattr(app_sessions, "HISTORY_LINE_CHARS", 1)  # a line per message, and per run's events
    _script_tool_run(openai_server)
    status, first = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
    await sse(first["run_id"])
    sid = first["session_id"]
    openai_server.script(Turn.say("Second answer, streamed in small pieces.", chunk_size=3))
    status, second = await api("POST", "astro/api/runs", body={"prompt": "And again?", "session_id": sid})
    await sse(second["run_id"])
    # the stream's last event reaches us just before the server hears from the agent host that the run
    # ended: the session brief below is compared with the session route's once the run is over
    for _ in range(500):
        status, session = await api("GET", f"astro/api/sessions/{sid}")
        if session["active_run_id"] is None:
            break
        await asyncio.sleep(0.02)

    response = await jp_fetch("astro", "api", "sessions", sid, "history", method="GET")
    assert response.code == 200 and response.headers["Content-Type"].startswith("application/x-ndjson")
    parts = [json.loads(line) for line in response.body.decode("utf-8").splitlines()]
    assert all(len(p) == 1 for p in parts)
    kinds = [next(iter(p)) for p in parts]
    assert kinds[0] == "session" and kinds == ["session"] + sorted(kinds[1:], key=lambda k: k != "messages")
    assert kinds.count("messages") > 2 and kinds.count("events") >= 2
    status, session = await api("GET", f"astro/api/sessions/{sid}")
    assert parts[0]["session"] == session

    status, full = await api("GET", f"astro/api/sessions/{sid}/messages")
    brief = [m for p in parts for m in p.get("messages", [])]
    assert [(m["id"], m["run_id"], m["role"], m["tool_call_id"], m["created_at"]) for m in brief] == \
        [(m["id"], m["run_id"], m["role"], m["tool_call_id"], m["created_at"]) for m in full["messages"]]
    for b, m in zip(brief, full["messages"]):
        assert b["content"] == ("" if m["role"] == "tool" else m["content"])
        assert b["tool_calls"] == ([{"id": c["id"]} for c in m["tool_calls"]] if m["tool_calls"] else None)
    assert any(m["role"] == "tool" and m["content"] for m in full["messages"])  # the brief form really is smaller

    status, page = await api("GET", f"astro/api/sessions/{sid}/events")
    assert [e for p in parts for e in p.get("events", [])] == page["events"]
    assert len(page["events"]) > 4

    missing = await jp_fetch("astro", "api", "sessions", "ses_missing", "history", method="GET", raise_error=False)
    assert missing.code == 404 and json.loads(missing.body)["reason"] == "session_not_found"


async def test_session_events_replay_the_stored_runs_folded_and_paged(api: Api, sse: Any, openai_server: Any,
                                                                      astro_service: AstroApp) -> None:
    """``GET sessions/{id}/events``: what a reopened sidebar replays — every stored event of every
    run, text deltas of one step folded into one event carrying the last seq, paged by cursor."""
    _script_tool_run(openai_server)
    status, first = await api("POST", "astro/api/runs", body={"prompt": "Where is M 87?"})
    live_one = await sse(first["run_id"])
    sid = first["session_id"]
    openai_server.script(Turn.say("Second answer, streamed in small pieces.", chunk_size=3))
    status, second = await api("POST", "astro/api/runs", body={"prompt": "And again?", "session_id": sid})
    live_two = await sse(second["run_id"])

    status, page = await api("GET", f"astro/api/sessions/{sid}/events")
    assert status == 200 and page["session_id"] == sid and page["next_cursor"] is None
    got = [(e["run_id"], e["seq"], e["event"]) for e in page["events"]]
    assert all(e["time"] for e in page["events"])
    # the same events, runs in order, deltas folded: the joined text is the streamed text
    for run_id, live in ((first["run_id"], live_one), (second["run_id"], live_two)):
        mine = [(seq, ev) for r, seq, ev in got if r == run_id]
        assert [ev["type"] for _, ev in mine if ev["type"] != "text_delta"] == \
            [ev["type"] for _, ev in live if ev["type"] != "text_delta"]
        assert "".join(ev["delta"] for _, ev in mine if ev["type"] == "text_delta") == \
            "".join(ev["delta"] for _, ev in live if ev["type"] == "text_delta")
        assert mine[-1] == live[-1]  # the done, with its own seq
        seqs = [seq for seq, _ in mine]
        assert seqs == sorted(seqs)
    assert [r for r, _, _ in got] == sorted((r for r, _, _ in got), key=lambda r: r != first["run_id"])
    deltas_two = [ev for _, ev in live_two if ev["type"] == "text_delta"]
    assert len(deltas_two) > 5
    folded_two = [ev for r, _, ev in got if r == second["run_id"] and ev["type"] == "text_delta"]
    assert len(folded_two) == 1 and folded_two[0]["delta"] == "Second answer, streamed in small pieces."
    text_seq = next(seq for r, seq, ev in got if r == second["run_id"] and ev["type"] == "text_delta")
    assert text_seq == max(seq for seq, ev in live_two if ev["type"] == "text_delta")

    # small pages: every raw event comes exactly once, across the run boundary too
    raw_total = len(live_one) + len(live_two)
    pages, cursor, seen = 0, None, []
    while True:
        params = {"limit": "4", **({"cursor": cursor} if cursor else {})}
        status, page = await api("GET", f"astro/api/sessions/{sid}/events", params=params)
        assert status == 200
        seen.extend((e["run_id"], e["seq"]) for e in page["events"])
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages >= raw_total // 4
    assert len(seen) == len(set(seen))
    assert {(first["run_id"], s) for s, _ in live_one} | {(second["run_id"], s) for s, _ in live_two} >= set(seen)
    assert (second["run_id"], live_two[-1][0]) in seen

    # bad cursors and limits: a clear 400, nothing else
    for params, reason in (({"cursor": "run_nope/3"}, "invalid_cursor"), ({"cursor": "garbage"}, "invalid_cursor"),
                           ({"cursor": f"{first['run_id']}/x"}, "invalid_cursor"), ({"limit": "0"}, "invalid_argument")):
        status, err = await api("GET", f"astro/api/sessions/{sid}/events", params=params)
        assert status == 400 and err["reason"] == reason, (params, err)
    other = await astro_service.services.sessions.create(title="other")
    status, err = await api("GET", f"astro/api/sessions/{other.id}/events", params={"cursor": f"{first['run_id']}/1"})
    assert status == 400 and err["reason"] == "invalid_cursor"  # a cursor of another session
    status, err = await api("GET", "astro/api/sessions/ses_missing/events")
    assert status == 404 and err["reason"] == "session_not_found"
