"""get_paper_metadata through the real executor: any identifier, full record, library state, related papers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from astro_jupyter.agent.tools.astro.metadata import GetPaperMetadataTool
from astro_jupyter.services.container import ServiceContainer
from tests.agent.executor_support import Recorder, call, make_ctx, make_executor
from tests.fakes.base import FakeServer
from tests.fakes.library_env import make_paper_config, started


async def run(services: ServiceContainer, **args: Any) -> Any:
    executor = make_executor(services, [GetPaperMetadataTool()], mode="auto")
    [result] = await executor.execute([call("get_paper_metadata", json.dumps(args))], make_ctx(services, Recorder()))
    return result.output


@pytest.mark.asyncio
async def test_unknown_paper_is_fetched_and_remembered(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    out = await run(paper_services, paper_id="https://doi.org/10.3847/1538-4357/ab042c")
    assert not out.is_error
    text = out.content
    assert text.splitlines()[0] == "LSST: From Science Drivers to Reference Design and Anticipated Data Products"
    assert "Library id: arxiv:0805.2366 · status: not downloaded" in text
    assert "Authors: Ivezić, Željko; Kahn, Steven M.;" in text
    assert "Published: The Astrophysical Journal (2019)" in text
    assert "Identifiers: arXiv 0805.2366v5, DOI 10.3847/1538-4357/ab042c, bibcode 2019ApJ...873..111I" in text
    assert "Citations: 3412" in text and "Keywords: astrometry, cosmology: observations" in text
    assert "Abstract: We describe here the most ambitious survey" in text
    assert out.metadata["status"] == "not_downloaded" and out.metadata["paper"]["state"] == "metadata"
    stored = await paper_services.library.get("2019ApJ...873..111I")
    assert stored.id == "arxiv:0805.2366"
    requests = len(ads_fake.requests)
    again = await run(paper_services, paper_id="arxiv:0805.2366")
    assert again.content == text and len(ads_fake.requests) == requests


@pytest.mark.asyncio
async def test_shows_download_and_parse_state(paper_services: ServiceContainer, tmp_path: Path) -> None:
    paper = await paper_services.library.resolve("2301.01234v2")
    await paper_services.library.set_downloaded(paper.id, tmp_path / "q.pdf")
    out = await run(paper_services, paper_id="2301.01234")
    assert "status: downloaded" in out.content and f"PDF: {tmp_path / 'q.pdf'}" in out.content
    assert "Published: preprint (2023)" in out.content and "Citations: unknown" in out.content
    assert "arXiv category: astro-ph.GA" in out.content
    await paper_services.library.set_parsed(paper.id, tmp_path / "q.md")
    out = await run(paper_services, paper_id=paper.id)
    assert "status: parsed" in out.content and f"Markdown: {tmp_path / 'q.md'}" in out.content


@pytest.mark.asyncio
async def test_references_and_citations(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    await paper_services.library.resolve("1111.0962")
    out = await run(paper_services, paper_id="2019ApJ...873..111I", include=["references"])
    assert "References (2 of 2):" in out.content
    assert "A Relation between Distance and Radial Velocity" in out.content
    refs = {r["paper_id"]: r["status"] for r in out.metadata["references"]["results"]}
    assert refs == {"doi:10.1073/pnas.15.3.168": "not_downloaded", "arxiv:1111.0962": "not_downloaded"}
    assert ads_fake.requests[-1].query["q"] == ["references(bibcode:2019ApJ...873..111I)"]
    out = await run(paper_services, paper_id="10.1073/pnas.15.3.168", include=["citations"], rows=2)
    assert "Citations (2 of 3):" in out.content


@pytest.mark.asyncio
async def test_related_papers_need_a_bibcode(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    async with started(make_paper_config(astro_home, ads_fake, arxiv_fake, ads_token="")) as services:
        out = await run(services, paper_id="2301.01234", include=["citations"])
    assert not out.is_error
    assert "Citations: unavailable (no ADS bibcode known for this paper)." in out.content


@pytest.mark.asyncio
async def test_errors_are_readable(paper_services: ServiceContainer, astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    out = await run(paper_services, paper_id="2999.99999")
    assert out.is_error and "Could not get metadata for '2999.99999'" in out.content and "arXiv has no paper" in out.content
    out = await run(paper_services, paper_id="dark matter")
    assert out.is_error and "not a paper identifier" in out.content and "DOI" in out.content
    async with started(make_paper_config(astro_home, ads_fake, arxiv_fake, ads_token="")) as services:
        out = await run(services, paper_id="1929PNAS...15..168H")
    assert out.is_error and "ADS_API_TOKEN" in out.content
    assert await paper_services.library.list() == []
