"""``AstroApp.run_tool``: the one path of a direct tool call (CLI ``tool``, ``%astro TOOL``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from astro_jupyter.app import AstroApp, Refuser
from astro_jupyter.app.follow import Question


class Scripted:
    """An answerer that replies from a list and records what it was asked."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.asked: list[Question] = []

    async def answer(self, question: Question) -> str:
        self.asked.append(question)
        return self.replies.pop(0)


@pytest.mark.asyncio
async def test_a_write_with_no_answerer_is_denied_and_writes_nothing(local_app: AstroApp) -> None:
    target = Path(local_app.config.project_root) / "report.txt"
    run = await local_app.run_tool("file_write", {"path": "report.txt", "content": "hello"})
    assert run.is_error and "denied" in run.content.lower()
    assert not target.exists()


@pytest.mark.asyncio
async def test_a_refuser_denies_too(local_app: AstroApp) -> None:
    run = await local_app.run_tool("file_write", {"path": "r.txt", "content": "x"}, answerer=Refuser())
    assert run.is_error and "denied" in run.content.lower()
    assert not (Path(local_app.config.project_root) / "r.txt").exists()


@pytest.mark.asyncio
async def test_an_answerer_that_allows_gets_the_whole_request_and_the_file_is_written(local_app: AstroApp) -> None:
    answerer = Scripted("allow")
    seen: list[Any] = []
    run = await local_app.run_tool("file_write", {"path": "report.txt", "content": "hello"}, answerer=answerer,
                                   on_event=seen.append)
    assert not run.is_error, run.content
    assert (Path(local_app.config.project_root) / "report.txt").read_text() == "hello"
    [question] = answerer.asked
    assert question.type == "permission_request" and question.name == "file_write"
    assert question.arguments == {"path": "report.txt", "content": "hello"}
    assert [e.type for e in seen].count("permission_request") == 1  # on_event saw it too
    assert run.arguments == {"path": "report.txt", "content": "hello"} and run.duration_ms >= 0


@pytest.mark.asyncio
async def test_a_typed_deny_and_bad_arguments_come_back_as_errors(local_app: AstroApp) -> None:
    denied = await local_app.run_tool("file_write", {"path": "a.txt", "content": "x"}, answerer=Scripted("deny"))
    assert denied.is_error and not (Path(local_app.config.project_root) / "a.txt").exists()
    unknown = await local_app.run_tool("no_such_tool", {})
    assert unknown.is_error and "no_such_tool" in unknown.content
    invalid = await local_app.run_tool("file_write", '{"path": 5')  # broken JSON from a caller
    assert invalid.is_error
