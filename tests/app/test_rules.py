"""The rules every front end shares, tested once here on the application layer (issue 23 item 5):
the prompt check, the max_steps bounds. The front ends only map the error to their own form."""

from __future__ import annotations

from typing import Any

import pytest
from traitlets import TraitError

from astro_jupyter.app import AstroApp
from astro_jupyter.app.runs import MAX_PROMPT_CHARS, MAX_STEPS_LIMIT
from astro_jupyter.config import AstroConfig
from astro_jupyter.errors import InvalidRequest
from tests.fakes.openai_server import Turn


@pytest.mark.asyncio
@pytest.mark.parametrize("prompt", ["", "   \n", None, 42, ["hi"]])
async def test_a_prompt_that_is_not_text_starts_nothing(local_app: AstroApp, prompt: Any) -> None:
    with pytest.raises(InvalidRequest, match="non-empty string") as info:
        await local_app.start_run_handle(None, prompt)
    assert info.value.reason == "invalid_prompt"
    assert await local_app.list_sessions(None, detail=False) == []


@pytest.mark.asyncio
async def test_a_prompt_over_the_limit_is_refused_with_413_and_starts_nothing(local_app: AstroApp) -> None:
    with pytest.raises(InvalidRequest) as info:
        await local_app.start_run_handle(None, "x" * (MAX_PROMPT_CHARS + 1))
    assert (info.value.reason, info.value.status) == ("prompt_too_long", 413)
    assert str(info.value) == f"the prompt has {MAX_PROMPT_CHARS + 1} characters; the limit is {MAX_PROMPT_CHARS}"
    assert await local_app.list_sessions(None, detail=False) == []


@pytest.mark.asyncio
@pytest.mark.parametrize("steps", [0, -1, MAX_STEPS_LIMIT + 1, 10**9, "5", 2.0, True])
async def test_max_steps_outside_1_to_200_is_refused_for_every_front_end(local_app: AstroApp, steps: Any) -> None:
    with pytest.raises(InvalidRequest, match="'max_steps' must be an integer from 1 to 200") as info:
        await local_app.start_run_handle(None, "hello", max_steps=steps)
    assert info.value.reason == "invalid_max_steps"
    assert await local_app.list_sessions(None, detail=False) == []


@pytest.mark.asyncio
async def test_max_steps_at_the_bounds_is_what_the_run_gets(local_app: AstroApp, openai_server: Any) -> None:
    openai_server.script(Turn.call("todo_write", {"todos": []}, id="t1"), Turn.say("never reached"))
    one = await local_app.start_run_handle(None, "plan", max_steps=1)
    assert (await one.wait()).reason == "max_steps"  # one turn: the call ran, no second turn
    openai_server.script(Turn.say("done"))
    most = await local_app.start_run_handle(None, "hello", max_steps=MAX_STEPS_LIMIT)
    assert (await most.wait()).reason == "finished"


def test_the_configured_default_is_held_to_the_same_bounds(tmp_path: Any) -> None:
    assert AstroConfig(home=str(tmp_path), max_steps=200).max_steps == 200
    for bad in (0, 201):
        with pytest.raises(TraitError, match="max_steps must be from 1 to 200"):
            AstroConfig(home=str(tmp_path), max_steps=bad)


@pytest.mark.asyncio
@pytest.mark.parametrize("reply, allowed", [("allow", True), ("always", True), ("deny", False), ("yes", False),
                                            ("ok", False), ("approve", False)])
async def test_a_permission_takes_allow_always_or_deny_and_nothing_else_allows(
        local_app: AstroApp, openai_server: Any, reply: str, allowed: bool) -> None:
    """One vocabulary for every front end (PERMISSION_ANSWERS): the HTTP route, ACP and the sidebar send these;
    typed replies are mapped onto them (permission_answer). Any other word is no consent."""
    from astro_jupyter.app import PERMISSION_ANSWERS, follow, permission_answer

    assert PERMISSION_ANSWERS == ("allow", "always", "deny")
    assert {permission_answer(r) for r in ("y", "yes", "a", "always", "n", "", "whatever")} <= set(PERMISSION_ANSWERS)
    openai_server.script(Turn.call("file_write", {"path": "band.txt", "content": "K"}, id="w1"), Turn.say("ok"))
    handle = await local_app.start_run_handle(None, "write it")
    async for event in follow(handle):
        if event.type == "permission_request":
            await local_app.answer(None, handle.run_id, event.request_id, reply)
    await handle.wait()
    from pathlib import Path

    assert (Path(local_app.config.project_root) / "band.txt").exists() is allowed
