"""get_paper_content through the executor: by section (fuzzy), by pages, paginated, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from astro_jupyter.agent.tools.astro.paper import GetPaperContentTool
from astro_jupyter.agent.tools.persist import MAX_OUTPUT_CHARS
from astro_jupyter.services.container import ServiceContainer
from tests.agent.tools.paper_support import PDFS, add_and_parse, run_tool


def test_flags() -> None:
    tool = GetPaperContentTool()
    assert tool.is_readonly and tool.is_concurrency_safe({"paper_id": "x"})


@pytest.mark.asyncio
async def test_section_by_name_case_insensitive_and_fuzzy(services: ServiceContainer) -> None:
    pid = await add_and_parse(services, PDFS / "two_column.pdf")
    out = await run_tool(services, "get_paper_content", {"paper_id": pid, "section": "RESULTS"})
    assert not out.is_error
    assert "section '3 Results'" in out.content and "## 3 Results" in out.content and "cored Burkert" in out.content
    assert "## 4 Conclusions" not in out.content and out.content.endswith("[end]")
    # a parent section brings its sub-sections; a prefix and a typo both find it
    parent = await run_tool(services, "get_paper_content", {"paper_id": pid, "section": "observations"})
    assert "### 2.1 Radio data" in parent.content and "### 2.2 Optical data" in parent.content
    assert "## 3 Results" not in parent.content
    numbered = await run_tool(services, "get_paper_content", {"paper_id": pid, "section": "2.1"})
    assert "Very Large Array" in numbered.content
    typo = await run_tool(services, "get_paper_content", {"paper_id": pid, "section": "Conclusoins"})
    assert "## 4 Conclusions" in typo.content
    refs = await run_tool(services, "get_paper_content", {"paper_id": pid, "section": "references"})
    assert "[8] Author A., Author B. 2008" in refs.content


@pytest.mark.asyncio
async def test_unknown_section_lists_sections(services: ServiceContainer) -> None:
    pid = await add_and_parse(services, PDFS / "two_column.pdf")
    out = await run_tool(services, "get_paper_content", {"paper_id": pid, "section": "spectroscopy"})
    assert out.is_error and "No section" in out.content
    assert "1 Introduction; 2 Observations and Methods; 2.1 Radio data" in out.content


@pytest.mark.asyncio
async def test_pages_and_pagination(services: ServiceContainer) -> None:
    pid = await add_and_parse(services, PDFS / "many_pages.pdf")
    out = await run_tool(services, "get_paper_content", {"paper_id": pid, "pages": "30-31", "limit": 1500})
    assert not out.is_error and "pages 30-31" in out.content
    nxt = out.metadata["next_offset"]
    assert nxt == 1500 and f"offset={nxt}" in out.content
    whole = await run_tool(services, "get_paper_content", {"paper_id": pid, "pages": "30-31", "limit": 100000})
    text = whole.content.split("\n\n", 1)[1]
    second = await run_tool(services, "get_paper_content", {"paper_id": pid, "pages": "30-31", "offset": nxt, "limit": 1500})
    assert second.content.split("\n\n", 1)[1].startswith(text[nxt : nxt + 200])
    assert "Topic number 1 of" not in text  # page 1 text is not in pages 30-31
    single = await run_tool(services, "get_paper_content", {"paper_id": pid, "pages": 60})
    assert not single.is_error
    beyond = await run_tool(services, "get_paper_content", {"paper_id": pid, "pages": "70-71"})
    assert beyond.is_error and "it has 60 pages" in beyond.content
    bad = await run_tool(services, "get_paper_content", {"paper_id": pid, "pages": "five"})
    assert bad.is_error and "pages must look like" in bad.content


@pytest.mark.asyncio
async def test_default_limit_fits_one_result(services: ServiceContainer, shared_pdfs: Path) -> None:
    pid = await add_and_parse(services, shared_pdfs / "pasa.pdf")
    out = await run_tool(services, "get_paper_content", {"paper_id": "2501.10120"})
    assert len(out.content) <= MAX_OUTPUT_CHARS
    assert out.content.startswith("PaSa") and out.metadata["next_offset"] is not None
    crawler = await run_tool(services, "get_paper_content", {"paper_id": pid, "section": "crawler"})
    assert "## 4.2 Crawler" in crawler.content or "### 4.2 Crawler" in crawler.content


@pytest.mark.asyncio
async def test_unparsed_paper(services: ServiceContainer) -> None:
    from tests.agent.tools.paper_support import add_pdf

    pid = await add_pdf(services, PDFS / "two_column.pdf")
    out = await run_tool(services, "get_paper_content", {"paper_id": pid})
    assert out.is_error and "has not been parsed yet; run parse_paper first" in out.content
