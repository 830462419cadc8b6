"""rag_search through the executor: passages without an LLM, a cited answer with the scripted LLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from astro_jupyter.agent.tools.astro.rag import RagSearchTool
from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer
from tests.agent.tools.paper_support import PDFS, add_and_parse, run_tool


def test_flags() -> None:
    tool = RagSearchTool()
    assert tool.is_readonly and tool.is_concurrency_safe({"query": "x"})
    assert tool.definition()["function"]["parameters"]["required"] == ["query"]


@pytest.mark.asyncio
async def test_empty_library(services: ServiceContainer) -> None:
    out = await run_tool(services, "rag_search", {"query": "dark matter"})
    assert not out.is_error and "no parsed papers yet" in out.content


@pytest.mark.asyncio
async def test_passages_without_llm(services: ServiceContainer, shared_pdfs: Path) -> None:
    halo = await add_and_parse(services, PDFS / "two_column.pdf")
    pasa = await add_and_parse(services, shared_pdfs / "pasa.pdf")
    out = await run_tool(services, "rag_search", {"query": "Which profile does the dark matter halo of the dwarf galaxy follow?", "k": 3})
    assert not out.is_error
    first = out.metadata["hits"][0]
    assert first["paper_id"] == halo and first["section"] == "3 Results" and first["page_start"] == 1
    assert "[1] Dark Matter in Dwarf Galaxies: A Synthetic Study, 3 Results, pp. 1-2" in out.content
    assert "cored Burkert profile" in out.content and "score" in out.content
    assert len(out.content) <= services.config.max_output_chars
    # filter to one paper, given by its arXiv id
    only = await run_tool(services, "rag_search", {"query": "dark matter halo", "paper_ids": ["2501.10120"], "k": 4})
    assert {h["paper_id"] for h in only.metadata["hits"]} == {pasa}
    # references never come back as passages
    refs = await run_tool(services, "rag_search", {"query": "Astrophysical Journal Author", "k": 10})
    assert all(h["section"] != "References" for h in refs.metadata["hits"])
    # hostile query text is just words
    odd = await run_tool(services, "rag_search", {"query": 'crawler" OR NEAR(( "PPO* -'})
    assert not odd.is_error and odd.metadata["hits"][0]["paper_id"] == pasa


@pytest.mark.asyncio
async def test_unknown_paper_filter_is_an_error(services: ServiceContainer) -> None:
    await add_and_parse(services, PDFS / "two_column.pdf")
    out = await run_tool(services, "rag_search", {"query": "halo", "paper_ids": ["local:nope"]})
    assert out.is_error and "not in the library" in out.content


@pytest.mark.asyncio
async def test_answer_cites_passages_with_scripted_llm(openai_server, tmp_path: Path, shared_pdfs: Path) -> None:
    from tests.fakes.openai_server import Turn

    cfg = AstroConfig(home=str(tmp_path / "h"), project_root=str(tmp_path), openai_base_url=openai_server.url, openai_api_key="k")
    c = ServiceContainer(cfg)
    await c.start()
    try:
        halo = await add_and_parse(c, PDFS / "two_column.pdf")
        await add_and_parse(c, shared_pdfs / "pasa.pdf")

        def answer(body):
            prompt = body["messages"][-1]["content"]
            # cite the passage that really contains the fact, by its number in the prompt
            for block in prompt.split("\n\n["):
                if "cored Burkert" in block:
                    n = block.lstrip("[").split("]", 1)[0]
                    return Turn.say(f"It follows a cored Burkert profile [{n}].")
            return Turn.say("The passages do not say.")

        openai_server.respond_with(answer)
        out = await run_tool(c, "rag_search", {"query": "Which profile does the dwarf galaxy halo follow?", "k": 4})
        assert not out.is_error, out.content
        n = out.metadata["cited"][0]
        assert out.content.startswith(f"It follows a cored Burkert profile [{n}].")
        source = out.metadata["sources"][n]
        assert source["paper_id"] == halo and source["section"] == "3 Results"
        assert f"[{n}] Dark Matter in Dwarf Galaxies: A Synthetic Study, 3 Results" in out.content
        assert len(openai_server.chat_requests) == 1
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_llm_failure_still_returns_passages(openai_server, tmp_path: Path) -> None:
    from tests.fakes.openai_server import Turn

    cfg = AstroConfig(home=str(tmp_path / "h"), project_root=str(tmp_path), openai_base_url=openai_server.url,
                      openai_api_key="k", llm_max_retries=0)
    c = ServiceContainer(cfg)
    await c.start()
    try:
        await add_and_parse(c, PDFS / "two_column.pdf")
        openai_server.script(Turn.fail(500, "boom"))
        out = await run_tool(c, "rag_search", {"query": "cored Burkert profile"})
        assert not out.is_error and "(no answer:" in out.content and "cored Burkert profile" in out.content
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_embedding_endpoint_down_then_back(openai_server, tmp_path: Path) -> None:
    """Parsing and searching survive a dead /embeddings; vectors are filled in once it answers."""
    home = str(tmp_path / "h")
    down = AstroConfig(home=home, project_root=str(tmp_path), openai_base_url="http://127.0.0.1:9/v1",
                       openai_api_key="k", embed_model="emb-small", llm_max_retries=0, llm_timeout_secs=2)
    c = ServiceContainer(down)
    await c.start()
    try:
        pid = await add_pdf_and_parse_allowing_embed_error(c)
        out = await run_tool(c, "rag_search", {"query": "cored Burkert profile halo"})
        assert not out.is_error and "vector search unavailable, full-text only" in out.content
        assert out.metadata["hits"][0]["paper_id"] == pid  # BM25 alone still finds it
    finally:
        await c.close()
    up = AstroConfig(home=home, project_root=str(tmp_path), openai_base_url=openai_server.url,
                     openai_api_key="k", embed_model="emb-small")
    c = ServiceContainer(up)
    await c.start()
    try:
        hits = await c.rag.search("cored Burkert profile halo", 3, mode="vector")
        space = await c.rag.space()
        assert space.backend == "endpoint:emb-small" and space.dim == openai_server.embedding_dim
        assert await c.chunks.vector_count(space) == await c.chunks.count() - len(await c.chunks.for_paper(pid, part="references"))
        assert hits and all(h.vector_rank is not None for h in hits)
    finally:
        await c.close()


async def add_pdf_and_parse_allowing_embed_error(c: ServiceContainer) -> str:
    from tests.agent.tools.paper_support import add_pdf

    pid = await add_pdf(c, PDFS / "two_column.pdf")
    out = await run_tool(c, "parse_paper", {"paper_id": pid})
    assert not out.is_error and "Embedding failed" in out.content and "rag_search will retry" in out.content
    assert out.metadata["embedded"] == 0 and await c.chunks.count(pid) > 0
    return pid


@pytest.mark.asyncio
async def test_front_matter_before_the_first_heading_is_searchable(services: ServiceContainer, shared_pdfs: Path) -> None:
    """paper.pdf has its abstract before the first heading ("Introduction"): it must be found."""
    pid = await add_and_parse(services, shared_pdfs / "paper.pdf")
    front = [c for c in await services.chunks.for_paper(pid) if c.part == "front"]
    assert front and any("explainable artificial intelligence" in c.text.lower() for c in front)
    out = await run_tool(services, "rag_search", {"query": "explainable artificial intelligence XAI perspective", "k": 10})
    assert any(h["chunk_id"] in {c.id for c in front} for h in out.metadata["hits"])
    fts_only = await services.rag.search("explainable artificial intelligence", 10, mode="fts", paper_ids=[pid])
    assert any(h.chunk.part == "front" for h in fts_only)
