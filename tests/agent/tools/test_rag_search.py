"""rag_search through the executor: passages without an LLM, a cited answer with the scripted LLM."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from astro_jupyter.agent.tools.astro.rag import RagSearchTool
from astro_jupyter.config import AstroConfig
from astro_jupyter.agent.tools.persist import MAX_OUTPUT_CHARS
from astro_jupyter.llm.client import LlmLimits
from astro_jupyter.services.container import ServiceContainer, Tuning
from astro_jupyter.services.rag import RagTuning
from tests.agent.tools.paper_support import PDFS, add_and_parse, run_tool
from tests.fakes.openai_server import Turn


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
    assert "cored Burkert profile" in out.content and "BM25" in out.content
    assert len(out.content) <= MAX_OUTPUT_CHARS
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
async def test_an_unrelated_question_is_not_scored_as_a_perfect_match(services: ServiceContainer, shared_pdfs: Path) -> None:
    """A question the library cannot answer (an ASN.1 manual was never parsed) gets the nearest
    passages labelled as a weak match, with absolute evidence, never a normalised 1.0."""
    await add_and_parse(services, PDFS / "two_column.pdf")
    await add_and_parse(services, shared_pdfs / "pasa.pdf")
    out = await run_tool(services, "rag_search", {"query": "ASN.1 DER encoding library functions", "k": 3})
    assert not out.is_error
    assert out.content.startswith("Weak match: the closest passage holds only")
    assert "score 1.0" not in out.content and "1.0000" not in out.content
    assert out.metadata["weak"] and all("score" not in h for h in out.metadata["hits"])
    related = await run_tool(services, "rag_search", {"query": "Which profile does the dark matter halo of the dwarf galaxy follow?"})
    assert related.metadata["weak"] == "" and "Weak match" not in related.content


@pytest.mark.asyncio
async def test_weak_match_by_cosine_with_a_sentence_model(services: ServiceContainer) -> None:
    """With a sentence embedding, the cosine decides: an off-topic question is below the line."""
    from astro_jupyter.services.rag import WEAK_COSINE, Hit
    from astro_jupyter.store.chunks import ChunkRow

    class Named:
        name = "local:all-MiniLM-L6-v2"

    services.rag.embedder = Named()
    chunk = ChunkRow.from_row({"id": 1, "paper_id": "local:x", "seq": 0, "section": "", "part": "body",
                               "page_start": 1, "page_end": 1, "text": "ASN.1 DER encoding library functions"})
    far = [Hit(chunk, 1.0, 1, 1, similarity=WEAK_COSINE - 0.1, bm25=3.0)]
    near = [Hit(chunk, 1.0, 1, 1, similarity=WEAK_COSINE + 0.2, bm25=3.0)]
    assert "cosine similarity 0.25" in services.rag.weak_match("chocolate cake", far)
    assert services.rag.weak_match("chocolate cake", near) == ""
    assert far[0].evidence() == "cosine 0.25, BM25 3.0"


@pytest.mark.asyncio
async def test_unparsed_papers_are_named(services: ServiceContainer, shared_pdfs: Path) -> None:
    """Papers added but never parsed are said to be unsearchable, in the result and its metadata."""
    await add_and_parse(services, PDFS / "two_column.pdf")
    waiting = (await services.library.add_pdf(shared_pdfs / "paper.pdf", fetch=False)).id
    out = await run_tool(services, "rag_search", {"query": "dark matter halo profile"})
    assert "Not searchable yet: 1 paper in the library is downloaded but not parsed: " + waiting in out.content
    assert out.metadata["not_searchable"]["unparsed"] == [waiting]
    empty = await run_tool(services, "rag_search", {"query": "anything", "paper_ids": [waiting]})
    assert "downloaded but not parsed" in empty.content


@pytest.mark.asyncio
async def test_unknown_paper_filter_is_an_error(services: ServiceContainer) -> None:
    await add_and_parse(services, PDFS / "two_column.pdf")
    out = await run_tool(services, "rag_search", {"query": "halo", "paper_ids": ["local:nope"]})
    assert out.is_error and "not in the library" in out.content


def _passages(prompt: str) -> dict[int, str]:
    """The re-ranking prompt's passages by id (what the scripted model reads)."""
    return {int(m.group(1)): m.group(2) for m in re.finditer(r'<passage id="(\d+)"[^>]*>\n(.*?)\n</passage>', prompt, re.S)}


def _scripted_reader(fact: str, quote: str, *, cite: str = "{n}"):
    """A scripted model: scores passages containing ``fact`` 9 (quoting ``quote``), others 1, then
    answers citing the evidence passage that holds the fact (by its number in the answer prompt)."""

    def respond(body):
        from tests.fakes.openai_server import Turn

        system, prompt = body["messages"][0]["content"], body["messages"][-1]["content"]
        if "relevance score" in system:
            scores = [{"id": n, "score": 9 if fact in text else 1, "quote": quote if fact in text else ""}
                      for n, text in _passages(prompt).items()]
            return Turn.say(json.dumps({"scores": scores}), usage={"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280})
        for block in prompt.split("\n\n["):
            if fact in block:
                n = block.lstrip("[").split("]", 1)[0]
                return Turn.say(f"It follows a cored Burkert profile [{cite.format(n=n)}].")
        return Turn.say("The passages do not say.")

    return respond


@pytest.mark.asyncio
async def test_answer_from_reranked_evidence_with_scripted_llm(openai_server, tmp_path: Path, shared_pdfs: Path) -> None:
    """Mechanism only (the scripted model follows a rule): one batched scoring call over the hybrid
    pool, evidence above the threshold, an answer whose [n] maps to paper, section and pages, and
    the re-ranking call's latency, tokens and cost in the metadata."""
    cfg = AstroConfig(home=str(tmp_path / "h"), project_root=str(tmp_path), openai_base_url=openai_server.url,
                      openai_api_key="k", llm_prices={"gpt-4o-mini": {"input": 0.15, "output": 0.6}})
    c = ServiceContainer(cfg)
    await c.start()
    try:
        halo = await add_and_parse(c, PDFS / "two_column.pdf")
        await add_and_parse(c, shared_pdfs / "pasa.pdf")
        openai_server.respond_with(_scripted_reader("cored Burkert", "The halo follows a cored Burkert profile"))
        out = await run_tool(c, "rag_search", {"query": "Which profile does the dwarf galaxy halo follow?", "k": 4})
        assert not out.is_error, out.content
        assert len(openai_server.chat_requests) == 2  # one scoring call for the whole pool, one answer
        scored = _passages(openai_server.chat_requests[0]["messages"][-1]["content"])
        assert len(scored) == min(RagTuning().rerank_pool, await c.chunks.searchable_count())
        rerank = out.metadata["rerank"]
        assert rerank["passages"] == len(scored) and rerank["kept"] >= 1 and rerank["latency_ms"] > 0
        assert rerank["usage"]["prompt_tokens"] == 1200 and rerank["cost_usd"] == pytest.approx((1200 * 0.15 + 80 * 0.6) / 1e6)
        n = out.metadata["cited"][0]
        assert out.content.startswith(f"It follows a cored Burkert profile [{n}].")
        source = out.metadata["sources"][n]
        assert source["paper_id"] == halo and source["section"] == "3 Results" and source["relevance"] == 9
        # every evidence passage is above the threshold; only they are numbered in the answer prompt
        assert all(h["relevance"] >= RagTuning().rerank_threshold for h in out.metadata["hits"])
        answer_prompt = openai_server.chat_requests[1]["messages"][-1]["content"]
        assert len(re.findall(r"^\[\d+\] \(", answer_prompt, re.M)) == len(out.metadata["hits"])
        assert f"[{n}] Dark Matter in Dwarf Galaxies: A Synthetic Study, 3 Results" in out.content
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_no_relevant_passage_refuses_without_an_answer_call(openai_server, tmp_path: Path) -> None:
    cfg = AstroConfig(home=str(tmp_path / "h"), project_root=str(tmp_path), openai_base_url=openai_server.url, openai_api_key="k")
    c = ServiceContainer(cfg)
    await c.start()
    try:
        await add_and_parse(c, PDFS / "two_column.pdf")
        openai_server.respond_with(_scripted_reader("no such fact anywhere", ""))
        out = await run_tool(c, "rag_search", {"query": "What is the Hubble constant?"})
        assert not out.is_error and out.metadata["refused"] is True
        assert out.content.startswith("The library's passages do not answer this question")
        assert "Top " in out.content and "relevance 1/10" in out.content  # the closest passages, with their scores
        assert len(openai_server.chat_requests) == 1 and out.metadata["rerank"]["kept"] == 0
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_citation_outside_the_evidence_is_corrected_or_refused(openai_server, tmp_path: Path) -> None:
    cfg = AstroConfig(home=str(tmp_path / "h"), project_root=str(tmp_path), openai_base_url=openai_server.url, openai_api_key="k")
    c = ServiceContainer(cfg)
    await c.start()
    try:
        await add_and_parse(c, PDFS / "two_column.pdf")
        openai_server.respond_with(_scripted_reader("cored Burkert", "", cite="{n}, 17"))
        out = await run_tool(c, "rag_search", {"query": "Which profile does the dwarf galaxy halo follow?", "k": 3})
        n = out.metadata["cited"][0]
        assert out.content.startswith(f"It follows a cored Burkert profile [{n}].")
        assert "(Removed citation [17]: not among the evidence passages.)" in out.content
        assert out.metadata["citation_check"] == {"invalid": [17], "action": "corrected"}
        openai_server.respond_with(_scripted_reader("cored Burkert", "", cite="40"))
        bad = await run_tool(c, "rag_search", {"query": "Which profile does the dwarf galaxy halo follow?", "k": 3})
        assert bad.metadata["citation_check"] == {"invalid": [40], "action": "refused"} and bad.metadata["answer"] == ""
        assert "answer refused" in bad.content and "[40]" in bad.content and "cored Burkert" in bad.content
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_unusable_scoring_answer_keeps_the_hybrid_order(openai_server, tmp_path: Path) -> None:
    from tests.fakes.openai_server import Turn

    cfg = AstroConfig(home=str(tmp_path / "h"), project_root=str(tmp_path), openai_base_url=openai_server.url, openai_api_key="k")
    c = ServiceContainer(cfg)
    await c.start()
    try:
        await add_and_parse(c, PDFS / "two_column.pdf")
        openai_server.script(Turn.say("Sure! Passage 3 looks great."), Turn.say("A cored Burkert profile [1]."))
        out = await run_tool(c, "rag_search", {"query": "cored Burkert profile", "k": 3})
        assert "no JSON object" in out.metadata["rerank"]["error"]
        assert out.content.startswith("A cored Burkert profile [1].") and out.metadata["hits"][0]["relevance"] is None
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_llm_failure_still_returns_passages(openai_server, tmp_path: Path) -> None:
    from tests.fakes.openai_server import Turn

    cfg = AstroConfig(home=str(tmp_path / "h"), project_root=str(tmp_path), openai_base_url=openai_server.url,
                      openai_api_key="k")
    c = ServiceContainer(cfg, tuning=Tuning(llm=LlmLimits(max_retries=0)))
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
                       openai_api_key="k", embed_model="emb-small", llm_timeout_secs=2)
    c = ServiceContainer(down, tuning=Tuning(llm=LlmLimits(max_retries=0)))
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


@pytest.mark.asyncio
async def test_remove_paper_asks_then_takes_its_passages_out(services: ServiceContainer) -> None:
    from astro_jupyter.agent.tools.astro.paper import tools as paper_tool_list
    from tests.agent.executor_support import Recorder, call, make_ctx, make_executor

    halo = await add_and_parse(services, PDFS / "two_column.pdf")
    executor = make_executor(services, paper_tool_list(services.config), mode="auto")
    # nobody to answer: denied, nothing removed
    [denied] = await executor.execute([call("remove_paper", json.dumps({"paper_id": halo}))], make_ctx(services, Recorder()))
    assert denied.output.is_error and "no one is there to answer" in denied.output.content
    assert (await services.library.get(halo)).state == "parsed" and await services.chunks.count(halo) > 0
    asked: list[str] = []

    async def allow(request) -> str:
        asked.append(request.message)
        return "allow"

    [done] = await executor.execute([call("remove_paper", json.dumps({"paper_id": halo}))],
                                    make_ctx(services, Recorder(), ask_permission=allow))
    assert asked == [f"remove_paper wants to remove {halo} from the library (its passages, PDF copy and Markdown; notes stay)"]
    assert not done.output.is_error and done.output.metadata["chunks"] > 0
    assert await services.chunks.count() == 0 and await services.library.find(halo) is None
    out = await run_tool(services, "rag_search", {"query": "Burkert profile dark matter halo"})
    assert "no parsed papers yet" in out.content


@pytest.mark.asyncio
async def test_a_failing_embedding_endpoint_falls_back_to_full_text_at_once(openai_server, tmp_path: Path) -> None:
    """A local server answering /v1/embeddings with 500: one request, then full-text ranking for that
    query, said in the result (it used to be retried five times per query)."""
    cfg = AstroConfig(home=str(tmp_path / "h"), project_root=str(tmp_path), openai_base_url=openai_server.url,
                      openai_api_key="k", embed_model="text-embedding-3-small")
    c = ServiceContainer(cfg, tuning=Tuning(llm=LlmLimits(retry_base_delay=0.01)))
    await c.start()
    try:
        halo = await add_and_parse(c, PDFS / "two_column.pdf")
        openai_server.embeddings_status = 500
        before = sum(r.path.endswith("/embeddings") for r in openai_server.requests)
        openai_server.respond_with(_scripted_reader("cored Burkert", "The halo follows a cored Burkert profile"))
        out = await run_tool(c, "rag_search", {"query": "Which profile does the dwarf galaxy halo follow?", "k": 3})
        assert not out.is_error, out.content
        assert sum(r.path.endswith("/embeddings") for r in openai_server.requests) - before == 1
        assert "vector search unavailable, full-text only" in out.content and "500" in out.metadata["vector_error"]
        assert out.metadata["hits"][0]["paper_id"] == halo and "cored Burkert profile" in out.content
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_an_answer_slower_than_the_tool_timeout_returns_the_passages_found(openai_server, tmp_path: Path) -> None:
    cfg = AstroConfig(home=str(tmp_path / "h"), project_root=str(tmp_path), openai_base_url=openai_server.url,
                      openai_api_key="k", tool_timeout_secs=2.0)
    c = ServiceContainer(cfg)
    await c.start()
    try:
        halo = await add_and_parse(c, PDFS / "two_column.pdf")
        openai_server.respond_with(lambda body: Turn.say('{"scores": []}', first_delay=4.0))  # a slow local model
        out = await run_tool(c, "rag_search", {"query": "Which profile does the dwarf galaxy halo follow?", "k": 3})
        assert not out.is_error, out.content
        assert "timed out" not in out.content and "time budget of 1.6 s" in out.content
        assert out.metadata["hits"] and out.metadata["hits"][0]["paper_id"] == halo
        assert "[1] Dark Matter in Dwarf Galaxies" in out.content
    finally:
        await c.close()
