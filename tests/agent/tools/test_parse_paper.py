"""parse_paper through the executor: Markdown file, chunks, embeddings, progress, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from astro_jupyter.agent.tools.astro.paper import ParsePaperTool
from astro_jupyter.agent.tools.base import InterruptBehavior
from astro_jupyter.services.container import ServiceContainer
from tests.agent.executor_support import Recorder
from tests.agent.tools.paper_support import PDFS, add_pdf, run_tool


def test_flags_follow_the_seed() -> None:
    tool = ParsePaperTool()
    assert not tool.is_concurrency_safe({"paper_id": "x"}) and not tool.is_readonly
    assert tool.defer_loading and tool.causes_sibling_abort
    assert tool.interrupt_behavior is InterruptBehavior.BLOCK


@pytest.mark.asyncio
async def test_parse_generated_pdf(services: ServiceContainer) -> None:
    paper_id = await add_pdf(services, PDFS / "two_column.pdf")
    recorder = Recorder()
    out = await run_tool(services, "parse_paper", {"paper_id": paper_id}, recorder)
    assert not out.is_error, out.content
    assert "from PDF: 2 pages" in out.content and "(+1 reference chunks kept apart)" in out.content
    assert "1 Introduction; 2 Observations and Methods; 2.1 Radio data" in out.content
    md = Path(out.metadata["markdown_path"]).read_text("utf-8")
    assert "| Galaxy | Distance | Mass |" in md
    record = await services.library.get(paper_id)
    assert record.state == "parsed" and record.markdown_path == out.metadata["markdown_path"]
    assert record.metadata["pages"] == 2
    chunks = await services.chunks.for_paper(paper_id)
    assert len(chunks) == out.metadata["chunks"] + out.metadata["references_chunks"]
    assert out.metadata["embedded"] == out.metadata["chunks"] and out.metadata["embedding_backend"] == "lexical-v2"
    progress = [e.progress for e in recorder.of("tool_progress")]
    assert [(p.get("done"), p.get("total")) for p in progress if "page" in p.get("message", "")] == [(1, 2), (2, 2)]
    n = out.metadata["chunks"]  # then the embedding, batch by batch
    assert progress[-1] == {"done": n, "total": n, "message": f"embedded {n}/{n} chunks"}


@pytest.mark.asyncio
async def test_already_parsed_and_force(services: ServiceContainer) -> None:
    paper_id = await add_pdf(services, PDFS / "two_column.pdf")
    await run_tool(services, "parse_paper", {"paper_id": paper_id})
    before = {c.id for c in await services.chunks.for_paper(paper_id)}
    again = await run_tool(services, "parse_paper", {"paper_id": paper_id})
    assert "already parsed" in again.content and again.metadata["already_parsed"]
    forced = await run_tool(services, "parse_paper", {"paper_id": paper_id, "force": True})
    after = {c.id for c in await services.chunks.for_paper(paper_id)}
    assert not forced.is_error and before.isdisjoint(after) and len(before) == len(after)


@pytest.mark.asyncio
async def test_real_paper_by_arxiv_id(services: ServiceContainer, shared_pdfs: Path) -> None:
    paper_id = await add_pdf(services, shared_pdfs / "pasa.pdf")
    assert paper_id == "arxiv:2501.10120"
    out = await run_tool(services, "parse_paper", {"paper_id": "2501.10120v1"})
    assert not out.is_error, out.content
    assert out.metadata["pages"] == 15
    for name in ("1 Introduction", "4.2 Crawler", "A.2 Roll-Out in PPO training"):
        assert name in out.metadata["sections"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "name, message",
    [
        ("encrypted.pdf", "the PDF is encrypted"),
        ("corrupt.pdf", "not a valid PDF"),
        ("image_only.pdf", "no extractable text: the PDF is image-only (scanned); OCR is not available"),
    ],
)
async def test_unusable_pdfs_are_error_results(services: ServiceContainer, name: str, message: str, tmp_path: Path) -> None:
    # the library copies whatever it is given; register the file directly (no PDF metadata to read)
    from astro_jupyter.store.papers import PaperRecord

    target = services.config.papers_dir / name
    target.write_bytes((PDFS / name).read_bytes())
    await services.library.papers.insert(PaperRecord(id=f"local:{name}", title=name, state="downloaded", pdf_path=str(target)))
    out = await run_tool(services, "parse_paper", {"paper_id": f"local:{name}"})
    assert out.is_error and message in out.content
    record = await services.library.get(f"local:{name}")
    assert record.state == "downloaded" and await services.chunks.count(record.id) == 0


@pytest.mark.asyncio
async def test_unknown_or_undownloaded_paper(services: ServiceContainer) -> None:
    from astro_jupyter.store.papers import PaperRecord

    out = await run_tool(services, "parse_paper", {"paper_id": "local:nothing"})
    assert out.is_error and "not in the library" in out.content
    await services.library.papers.insert(PaperRecord(id="arxiv:2401.00001", arxiv_id="2401.00001", title="T", state="metadata"))
    out = await run_tool(services, "parse_paper", {"paper_id": "arxiv:2401.00001"})
    assert out.is_error and "download it first" in out.content


@pytest.mark.asyncio
async def test_html_paper(services: ServiceContainer) -> None:
    from astro_jupyter.store.papers import PaperRecord

    html = Path(__file__).resolve().parents[2] / "data" / "html" / "ar5iv_sample.html"
    target = services.config.papers_dir / "streams.html"
    target.write_text(html.read_text("utf-8"), "utf-8")
    await services.library.papers.insert(PaperRecord(id="local:streams", title="", state="downloaded", pdf_path=str(target)))
    out = await run_tool(services, "parse_paper", {"paper_id": "local:streams"})
    assert not out.is_error, out.content
    assert "from HTML" in out.content and "2.1 Gaia astrometry" in out.metadata["sections"]
    assert (await services.library.get("local:streams")).title == "Stellar Streams in the Galactic Halo"


@pytest.mark.asyncio
async def test_two_parses_at_once_take_turns(services: ServiceContainer, shared_pdfs: Path) -> None:
    """Two sessions parsing at the same time (MuPDF is not thread-safe): both complete intact."""
    import asyncio

    a = await add_pdf(services, PDFS / "many_pages.pdf")
    b = await add_pdf(services, shared_pdfs / "pasa.pdf")
    out_a, out_b = await asyncio.gather(
        services.parser.parse(a), services.parser.parse(b)
    )
    assert out_a.pages == 60 and out_b.pages == 15
    assert "4.2 Crawler" in out_b.sections and "30 Topic number 30 of the course" in out_a.sections
