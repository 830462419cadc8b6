"""``follow(run, answerer)``: a run's events, its questions handed to the front end's answerer and
the answers posted back (the scripted OpenAI server drives a real run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from astro_jupyter.app import AstroApp, Refuser, follow, permission_answer
from astro_jupyter.app.runs import MAX_PROMPT_CHARS
from astro_jupyter.errors import InvalidRequest
from tests.app.test_tools import Scripted
from tests.fakes.openai_server import Turn


def _script(openai_server: Any) -> None:
    openai_server.script(
        Turn.call("ask_user", {"question": "Which band?", "options": ["V", "K"]}, id="q1"),
        Turn.call("file_write", {"path": "band.txt", "content": "band K"}, id="w1"),
        Turn.say("Wrote band.txt."),
    )


@pytest.mark.asyncio
async def test_follow_hands_both_questions_to_the_answerer_and_the_run_finishes(local_app: AstroApp,
                                                                               openai_server: Any) -> None:
    _script(openai_server)
    handle = await local_app.start_run_handle(None, "write down the band I choose")
    answerer = Scripted("K", "allow")
    events = [e async for e in follow(handle, answerer)]
    done = await handle.wait()

    assert done.reason == "finished"
    assert [q.type for q in answerer.asked] == ["ask_user", "permission_request"]
    assert answerer.asked[0].question == "Which band?" and answerer.asked[0].options == ["V", "K"]
    assert answerer.asked[1].name == "file_write"
    # each question was yielded (so a front end shows it) before its answer let the run go on
    types = [e.type for e in events]
    assert types.index("ask_user") < types.index("permission_request") < types.index("done")
    results = {e.tool_call_id: e for e in events if e.type == "tool_result"}
    assert "K" in results["q1"].output and not results["w1"].is_error
    assert (Path(local_app.config.project_root) / "band.txt").read_text() == "band K"
    assert handle.final_text == "Wrote band.txt."
    # the model saw the user's answer as the ask_user result
    assert "K" in str(openai_server.chat_requests[1]["messages"][-1]["content"])


@pytest.mark.asyncio
async def test_with_a_refuser_the_write_is_denied_and_the_run_still_finishes(local_app: AstroApp,
                                                                            openai_server: Any) -> None:
    _script(openai_server)
    handle = await local_app.start_run_handle(None, "write down the band I choose")
    events = [e async for e in follow(handle, Refuser())]
    assert (await handle.wait()).reason == "finished"
    results = {e.tool_call_id: e for e in events if e.type == "tool_result"}
    assert results["w1"].is_error and "denied" in results["w1"].output.lower()
    assert not (Path(local_app.config.project_root) / "band.txt").exists()


@pytest.mark.asyncio
async def test_the_local_user_sees_every_session_and_prompts_are_checked(local_app: AstroApp) -> None:
    alice = await local_app.create_session("alice", title="  Alice's   notes ")
    assert alice["title"] == "Alice's notes" and alice["source"] == "cli"
    assert (await local_app.session(None, alice["id"])).owner == "alice"  # the CLI / kernel user
    assert [s["id"] for s in await local_app.list_sessions(None, detail=False)] == [alice["id"]]
    with pytest.raises(Exception, match="no session"):
        await local_app.session("bob", alice["id"])
    with pytest.raises(InvalidRequest, match="non-empty"):
        await local_app.start_run_handle(None, "   ")
    with pytest.raises(InvalidRequest, match=f"the limit is {MAX_PROMPT_CHARS}"):
        local_app.check_prompt("x" * (MAX_PROMPT_CHARS + 1))


def test_permission_answer_maps_typed_replies() -> None:
    assert [permission_answer(r) for r in ("y", " YES ", "allow", "a", "always", "", "n", "sure")] == [
        "allow", "allow", "allow", "always", "always", "deny", "deny", "deny"]


@pytest.mark.asyncio
async def test_no_one_to_answer_is_said_as_such_not_as_the_users_deny(local_app: AstroApp, openai_server: Any) -> None:
    """A refuser (a script, no terminal) used to answer "deny", and the model read "the user answered 'deny'"."""
    _script(openai_server)
    handle = await local_app.start_run_handle(None, "write down the band I choose")
    events = [e async for e in follow(handle, Refuser())]
    assert (await handle.wait()).reason == "finished"
    written = {e.tool_call_id: e for e in events if e.type == "tool_result"}["w1"]
    assert written.is_error and "no one answered: it was asked where no one can answer" in written.output
    assert "the user answered" not in written.output and "'deny'" not in written.output
    [closed] = [e for e in events if e.type == "question_answered" and e.answer != "(no answer: the question was asked where no one can answer)"]
    assert closed.answer == "(no answer: it was asked where no one can answer)"


@pytest.mark.asyncio
async def test_a_question_withdrawn_by_an_interrupt_says_cancelled_not_a_raw_repr(tmp_path: Path, caplog: Any) -> None:
    """After an interrupt the log said "ask_permission failed: QuestionCancelled(...)" and the result
    "the user answered 'nothing'"."""
    import asyncio
    import json
    import logging

    from astro_jupyter.agent.executor import ToolCallRequest, ToolExecutor
    from astro_jupyter.agent.permissions import PermissionChecker
    from astro_jupyter.agent.tools.base import ToolContext
    from astro_jupyter.agent.tools.file_state import FileStateCache
    from astro_jupyter.agent.tools.filesystem import tools
    from astro_jupyter.agent.tools.registry import ToolRegistry
    from astro_jupyter.config import AstroConfig
    from astro_jupyter.errors import QuestionCancelled, QuestionUnanswered
    from astro_jupyter.services.container import ServiceContainer

    config = AstroConfig(home=str(tmp_path / "home"), project_root=str(tmp_path))
    services = await ServiceContainer(config).start()
    cancelled = asyncio.Event()

    async def interrupted(request: Any) -> str:
        cancelled.set()
        raise QuestionCancelled("the run was cancelled before the question was answered")

    async def no_input(request: Any) -> str:
        raise QuestionUnanswered("this kernel has no input to answer with")

    async def emit(event: Any) -> None:
        return None

    try:
        outputs = []
        for asker, flag in ((interrupted, cancelled), (no_input, asyncio.Event())):
            ctx = ToolContext(config=config, services=services, session_id="s", cancelled=flag, emit=emit,
                              file_state=FileStateCache(), ask_permission=asker)
            executor = ToolExecutor(ToolRegistry(tools(config)), PermissionChecker([], "auto"), None, config)
            with caplog.at_level(logging.WARNING):
                [done] = await executor.execute([ToolCallRequest("c1", "file_write", json.dumps(
                    {"path": "a.txt", "content": "x"}))], ctx)
            outputs.append(done.output.content)
    finally:
        await services.close()
    assert outputs[0] == "Error: file_write was cancelled by the user before it started."
    assert "no one answered: this kernel has no input to answer with" in outputs[1]
    assert not (tmp_path / "a.txt").exists()
    said = " ".join(outputs) + caplog.text
    assert "QuestionCancelled(" not in said and "the user answered" not in said
