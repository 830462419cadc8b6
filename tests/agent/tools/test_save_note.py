"""save_note through the executor."""

from __future__ import annotations

import pytest

from astro_jupyter.agent.tools.astro.note import SaveNoteTool
from astro_jupyter.agent.tools.base import InterruptBehavior
from astro_jupyter.services.container import ServiceContainer
from tests.agent.tools.paper_support import PDFS, add_pdf, run_tool


def test_flags() -> None:
    tool = SaveNoteTool()
    assert not tool.is_concurrency_safe({}) and not tool.is_readonly
    assert tool.interrupt_behavior is InterruptBehavior.BLOCK


@pytest.mark.asyncio
async def test_save_and_find_note(services: ServiceContainer) -> None:
    pid = await add_pdf(services, PDFS / "two_column.pdf")
    out = await run_tool(services, "save_note", {
        "paper_id": pid, "quote": "cored Burkert profile", "comment": "Compare with NFW fits", "page": 1, "section": "3 Results",
    })
    assert not out.is_error, out.content
    assert out.content == f"Saved note #{out.metadata['id']} on {pid} (p. 1, 3 Results)."
    assert out.metadata["session_id"] == "s1"
    found = await services.notes.search("burkert nfw")
    assert [n.id for n in found] == [out.metadata["id"]]


@pytest.mark.asyncio
async def test_errors_are_results_and_nothing_is_saved(services: ServiceContainer) -> None:
    pid = await add_pdf(services, PDFS / "two_column.pdf")
    empty = await run_tool(services, "save_note", {"paper_id": pid})
    assert empty.is_error and "needs a quote or a comment" in empty.content
    unknown = await run_tool(services, "save_note", {"paper_id": "local:nope", "comment": "x"})
    assert unknown.is_error and "not in the library" in unknown.content
    bad_page = await run_tool(services, "save_note", {"paper_id": pid, "comment": "x", "page": 0})
    assert bad_page.is_error  # the schema says minimum 1
    assert await services.notes.list() == []
