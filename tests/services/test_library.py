"""The paper library service: resolving identifiers (fetching from the fakes), local PDFs, states."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from astro_jupyter.errors import ConfigError, NotFoundError, ToolInputError
from astro_jupyter.services.container import ServiceContainer
from astro_jupyter.services.library import local_status
from tests.fakes.base import FakeServer
from tests.fakes.file_server import make_pdf
from tests.fakes.library_env import make_paper_config, started


@pytest.mark.asyncio
async def test_resolve_fetches_merges_and_stores(paper_services: ServiceContainer, ads_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    lib = paper_services.library
    paper = await lib.resolve("arXiv:0805.2366v5")
    assert paper.id == "arxiv:0805.2366"
    assert paper.state == "metadata" and local_status(paper) == "not_downloaded"
    # ADS metadata preferred (title casing, journal, keywords, citations), arXiv fills the version.
    assert paper.title == "LSST: From Science Drivers to Reference Design and Anticipated Data Products"
    assert paper.journal == "The Astrophysical Journal"
    assert paper.bibcode == "2019ApJ...873..111I" and paper.doi == "10.3847/1538-4357/ab042c"
    assert paper.arxiv_version == "v5" and paper.citation_count == 3412
    assert paper.authors[0] == "Ivezić, Željko"
    assert paper.metadata.get("primary_category") == "astro-ph"
    calls = len(ads_fake.requests) + len(arxiv_fake.requests)
    # Every other identifier of the same paper resolves to the stored entry without the network.
    for other in ("10.3847/1538-4357/AB042C", "2019ApJ...873..111I", "https://arxiv.org/abs/0805.2366", "arxiv:0805.2366"):
        again = await lib.resolve(other)
        assert again.id == paper.id
    assert len(ads_fake.requests) + len(arxiv_fake.requests) == calls
    assert [p.id for p in await lib.list()] == ["arxiv:0805.2366"]


@pytest.mark.asyncio
async def test_resolve_without_ads_uses_arxiv_and_explains_doi_lookups(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    config = make_paper_config(astro_home, ads_fake, arxiv_fake, ads_token="")
    async with started(config) as services:
        paper = await services.library.resolve("2301.01234v2")
        assert paper.title == "Quenching of dwarf galaxy satellites in the Local Volume"
        assert paper.arxiv_version == "v2" and paper.bibcode is None
        with pytest.raises(ConfigError, match="ADS_API_TOKEN"):
            await services.library.resolve("10.1073/pnas.15.3.168")
        assert ads_fake.requests == []


@pytest.mark.asyncio
async def test_resolve_with_ads_down_still_gets_arxiv(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    ads_fake.state["fail_all"] = 500
    async with started(make_paper_config(astro_home, ads_fake, arxiv_fake)) as services:
        paper = await services.library.resolve("1111.0962")
        assert paper.authors[0] == "S. F. Sánchez"
        assert any("HTTP 500" in e for e in paper.metadata["fetch_errors"])


@pytest.mark.asyncio
async def test_unknown_identifier_and_bad_input(paper_services: ServiceContainer) -> None:
    lib = paper_services.library
    with pytest.raises(NotFoundError, match="2999.99999"):
        await lib.resolve("2999.99999")
    with pytest.raises(ToolInputError, match="not a paper identifier"):
        await lib.resolve("dark matter halos")
    with pytest.raises(NotFoundError, match="not in the library"):
        await lib.get("arxiv:0805.2366")
    assert await lib.list() == []


@pytest.mark.asyncio
async def test_add_local_pdf_from_its_own_metadata(paper_services: ServiceContainer, tmp_path: Path) -> None:
    src = tmp_path / "my draft.pdf"
    src.write_bytes(make_pdf("Stellar streams in the Galactic halo", pages=2))
    lib = paper_services.library
    paper = await lib.add(str(src))
    assert paper.id == "local:stellar-streams-in-the-galactic-halo"
    assert paper.title == "Stellar streams in the Galactic halo"
    assert paper.state == "downloaded" and paper.source == "local"
    stored = Path(paper.pdf_path or "")
    assert stored.parent == paper_services.config.papers_dir and stored.read_bytes() == src.read_bytes()
    assert paper.metadata["pages"] == 2
    # Adding the same file again is a no-op; a different file with the same title gets its own id.
    assert (await lib.add(str(src))).id == paper.id
    other = tmp_path / "other.pdf"
    other.write_bytes(make_pdf("Stellar streams in the Galactic halo", pages=3))
    assert (await lib.add(str(other))).id == "local:stellar-streams-in-the-galactic-halo-2"
    assert len(await lib.list()) == 2


@pytest.mark.asyncio
async def test_add_real_arxiv_pdf_takes_its_arxiv_id(paper_services: ServiceContainer, shared_pdfs: Path, tmp_path: Path) -> None:
    src = tmp_path / "pasa.pdf"
    shutil.copyfile(shared_pdfs / "pasa.pdf", src)
    paper = await paper_services.library.add(str(src))
    assert paper.id == "arxiv:2501.10120" and paper.arxiv_version == "v1"
    assert paper.title == "PaSa: An LLM Agent for Comprehensive Academic Paper Search"
    assert "fetch_error" in paper.metadata  # the fakes do not know it; the PDF's metadata stands
    assert Path(paper.pdf_path or "").name == "arxiv_2501.10120.pdf"
    assert (await paper_services.library.get("2501.10120v3")).id == paper.id


@pytest.mark.asyncio
async def test_add_rejects_missing_and_corrupt_files(paper_services: ServiceContainer, tmp_path: Path) -> None:
    lib = paper_services.library
    with pytest.raises(ToolInputError, match="no such PDF file"):
        await lib.add(str(tmp_path / "missing.pdf"))
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"this is not a pdf at all")
    with pytest.raises(ToolInputError, match="not a readable PDF"):
        await lib.add(str(bad))
    text = tmp_path / "notes.txt"
    text.write_text("Some notes that pymupdf could open as a document")
    with pytest.raises(ToolInputError, match="does not start with %PDF-"):
        await lib.add(str(text))
    assert await lib.list() == []
    assert list(paper_services.config.papers_dir.glob("*.pdf")) == []


@pytest.mark.asyncio
async def test_add_identifier_then_state_changes(paper_services: ServiceContainer, tmp_path: Path) -> None:
    lib = paper_services.library
    paper = await lib.add("10.1073/pnas.15.3.168")
    assert paper.id == "doi:10.1073/pnas.15.3.168" and paper.bibcode == "1929PNAS...15..168H"
    pdf = tmp_path / "h.pdf"
    pdf.write_bytes(make_pdf())
    downloaded = await lib.set_downloaded("1929PNAS...15..168H", pdf)
    assert downloaded.state == "downloaded" and downloaded.pdf_path == str(pdf)
    parsed = await lib.set_parsed(paper.id, tmp_path / "h.md")
    assert parsed.state == "parsed" and parsed.markdown_path == str(tmp_path / "h.md")
    assert local_status(parsed) == "parsed"
    assert [p.id for p in await lib.list(state="parsed")] == [paper.id]
    with pytest.raises(ValueError, match="state must be one of"):
        await lib.set_state(paper.id, "half-done")
    assert (await lib.set_state(paper.id, "metadata")).state == "metadata"


@pytest.mark.asyncio
async def test_concurrent_resolves_of_one_paper_make_one_entry(paper_services: ServiceContainer) -> None:
    import asyncio

    lib = paper_services.library
    papers = await asyncio.gather(
        lib.resolve("0805.2366"), lib.resolve("10.3847/1538-4357/ab042c"), lib.resolve("2019ApJ...873..111I")
    )
    assert {p.id for p in papers} == {"arxiv:0805.2366"}
    assert [p.id for p in await lib.list()] == ["arxiv:0805.2366"]


@pytest.mark.asyncio
async def test_local_pdf_of_a_known_paper_keeps_the_curated_metadata(paper_services: ServiceContainer, tmp_path: Path) -> None:
    lib = paper_services.library
    known = await lib.resolve("2301.01234")
    src = tmp_path / "dl.pdf"
    src.write_bytes(make_pdf("Some running header", extra_text="arXiv:2301.01234v1 [astro-ph.GA] 3 Jan 2023"))
    paper = await lib.add(str(src), fetch=False)
    assert paper.id == known.id and paper.state == "downloaded"
    assert paper.title == "Quenching of dwarf galaxy satellites in the Local Volume"
    assert Path(paper.pdf_path or "").read_bytes() == src.read_bytes()
    assert [p.name for p in paper_services.config.papers_dir.iterdir()] == ["arxiv_2301.01234.pdf"]


def test_read_pdf_info_waits_for_the_pymupdf_lock(tmp_path: Path) -> None:
    """MuPDF is not thread-safe: reading a PDF's info takes turns with a parse holding the lock."""
    import threading

    from astro_jupyter.services.library import read_pdf_info
    from astro_jupyter.services.parse.pdf import PYMUPDF_LOCK as parse_lock
    from astro_jupyter.services.pdf_lock import PYMUPDF_LOCK

    assert parse_lock is PYMUPDF_LOCK  # one lock for the parser and the library
    src = tmp_path / "draft.pdf"
    src.write_bytes(make_pdf("Stellar streams in the Galactic halo", pages=1))
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(read_pdf_info(src)))
    with PYMUPDF_LOCK:
        worker.start()
        worker.join(0.3)
        assert worker.is_alive() and not result  # blocked while another thread holds the lock
    worker.join(10)
    assert result["title"] == "Stellar streams in the Galactic halo" and result["pages"] == 1


def test_read_pdf_info_title_has_no_ligature_glyphs(tmp_path: Path) -> None:
    from astro_jupyter.services.library import read_pdf_info
    from tests.services.test_parse_pdf import LIGATURE_CHARS, make_ligature_pdf

    info = read_pdf_info(make_ligature_pdf(tmp_path / "lig.pdf", title="Efficient profile fitting"))
    assert info["title"] == "Efficient profile fitting", info["title"]
    assert not LIGATURE_CHARS.search(info["title"])


@pytest.mark.asyncio
async def test_a_service_answer_for_another_paper_is_not_taken(
    paper_services: ServiceContainer, ads_fake: FakeServer, tmp_path: Path
) -> None:
    """ADS answering arXiv 2501.10120 with an unrelated paper must not rename the local PDF."""
    ads_fake.state["nearest"] = "2019ApJ...873..111I"  # LSST, arXiv 0805.2366
    src = tmp_path / "pasa-like.pdf"
    src.write_bytes(make_pdf("PaSa: An LLM Agent for Paper Search",
                             extra_text="arXiv:2501.10120v1 [cs.IR] 17 Jan 2025"))
    paper = await paper_services.library.add(str(src))
    assert paper.id == "arxiv:2501.10120" and paper.arxiv_id == "2501.10120"
    assert paper.title == "PaSa: An LLM Agent for Paper Search"
    assert paper.bibcode is None and paper.doi is None and paper.journal == ""
    assert "different paper" in paper.metadata["fetch_error"] and "0805.2366" in paper.metadata["fetch_error"]
    # the unrelated paper's identifiers still belong to no one: resolving it fetches it as itself
    lsst = await paper_services.library.resolve("2019ApJ...873..111I")
    assert lsst.id == "arxiv:0805.2366" and lsst.id != paper.id
    # get_paper_metadata / download_paper resolve through the same rule
    with pytest.raises(NotFoundError, match="different paper"):
        await paper_services.library.resolve("10.1000/not-in-ads")


@pytest.mark.asyncio
async def test_a_matching_answer_by_doi_or_alternate_id_is_taken(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    ads_fake.state["nearest"] = "1929PNAS...15..168H"
    paper = await paper_services.library.resolve("10.1051/0004-6361/201117353")  # upper/lower case, listed DOI
    assert paper.id == "arxiv:1111.0962" and paper.bibcode == "2012A&A...538A...8S"
