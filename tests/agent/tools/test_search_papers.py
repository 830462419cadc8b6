"""search_papers through the real executor against the ADS and arXiv fakes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from astro_jupyter.agent.tools.astro import metadata as metadata_family
from astro_jupyter.agent.tools.astro import search as search_family
from astro_jupyter.agent.tools.astro.metadata import GetPaperMetadataTool
from astro_jupyter.agent.tools.astro.search import SearchPapersTool
from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer, Tuning
from tests.agent.executor_support import Recorder, call, make_ctx, make_executor
from tests.fakes.base import FakeServer
from tests.fakes.library_env import make_paper_config, started


async def run_search(services: ServiceContainer, **args: Any) -> tuple[Any, Recorder]:
    recorder = Recorder()
    executor = make_executor(services, [SearchPapersTool()], mode="auto")
    [result] = await executor.execute([call("search_papers", json.dumps(args))], make_ctx(services, recorder))
    return result.output, recorder


def test_declaration() -> None:
    [search] = search_family.tools(AstroConfig())
    [meta] = metadata_family.tools(AstroConfig())
    assert (search.name, meta.name) == ("search_papers", "get_paper_metadata")
    for tool in (search, meta):
        assert tool.is_readonly and tool.is_concurrency_safe({}) and not tool.defer_loading
        assert len(tool.classifier_summary()) <= 100 and not tool.classifier_summary().endswith("...")
    params = search.definition()["function"]["parameters"]
    assert set(params["properties"]) == {"query", "rows", "sort", "sources"} and params["required"] == ["query"]


@pytest.mark.asyncio
async def test_merges_and_deduplicates_across_sources(paper_services: ServiceContainer) -> None:
    out, recorder = await run_search(paper_services, query="galaxy survey")
    assert not out.is_error
    results = out.metadata["results"]
    assert len(results) == 4  # 4 ADS hits + 3 arXiv hits, 3 of them the same papers
    by_id = {r["paper_id"]: r for r in results}
    lsst = by_id["arxiv:0805.2366"]
    assert lsst["sources"] == ["ads", "arxiv"]
    assert lsst["title"] == "LSST: From Science Drivers to Reference Design and Anticipated Data Products"  # ADS wins
    assert lsst["arxiv_version"] == "v5" and lsst["citation_count"] == 3412 and lsst["bibcode"] == "2019ApJ...873..111I"
    assert by_id["arxiv:1111.0962"]["authors"][0] == "Sánchez, S. F."
    old = by_id["arxiv:astro-ph/0601001"]  # no DOI anywhere: matched by the old-style arXiv id
    assert old["sources"] == ["ads", "arxiv"] and old["authors"][1] == "Ødegaard, Ingrid"
    sparse = by_id["bib:2021MNRAS.500.1111Z"]
    assert sparse["sources"] == ["ads"] and sparse["citation_count"] is None and sparse["authors"] == []
    assert all(r["status"] == "not_downloaded" and not r["in_library"] for r in results)
    assert out.metadata["sources"]["ads"] == {"ok": True, "count": 4, "total": 4}
    assert out.metadata["sources"]["arxiv"] == {"ok": True, "count": 3, "total": 3}
    text = out.content
    assert text.startswith('4 papers for "galaxy survey" (ADS: 4 of 4; arXiv: 3 of 3).')
    assert "1. [arxiv:0805.2366] LSST: From Science Drivers to Reference Design and Anticipated Data Products (2019)" in text
    assert "— Ivezić, Željko; Kahn, Steven M. et al.\n" in text
    assert "   The Astrophysical Journal · arXiv 0805.2366v5 · doi:10.3847/1538-4357/ab042c · 3412 citations · not downloaded" in text
    assert "[bib:2021MNRAS.500.1111Z] Notes on a galaxy survey with sparse metadata (2021) — unknown authors" in text
    assert "preprint · citations unknown · not downloaded" in text
    assert len(text) < 250 * len(results)  # two compact lines per paper
    assert [e.type for e in recorder.events if e.type in ("tool_call", "tool_result")] == ["tool_call", "tool_result"]


@pytest.mark.asyncio
async def test_hits_show_local_library_status(paper_services: ServiceContainer, tmp_path: Path) -> None:
    lib = paper_services.library
    lsst = await lib.resolve("0805.2366")
    await lib.set_downloaded(lsst.id, tmp_path / "a.pdf")
    califa = await lib.resolve("10.1051/0004-6361/201117353")
    await lib.set_parsed(califa.id, tmp_path / "c.md")
    await lib.resolve("2301.01234")  # metadata only
    out, _ = await run_search(paper_services, query="galaxy", rows=10)
    status = {r["paper_id"]: (r["status"], r["in_library"]) for r in out.metadata["results"]}
    assert status["arxiv:0805.2366"] == ("downloaded", True)
    assert status["arxiv:1111.0962"] == ("parsed", True)
    assert status["arxiv:2301.01234"] == ("not_downloaded", True)
    assert status["bib:2021MNRAS.500.1111Z"] == ("not_downloaded", False)
    assert "1021 citations · parsed" in out.content and "3412 citations · downloaded" in out.content


@pytest.mark.asyncio
async def test_without_ads_token_arxiv_alone_answers(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    async with started(make_paper_config(astro_home, ads_fake, arxiv_fake, ads_token="")) as services:
        out, _ = await run_search(services, query="dwarf galaxy")
    assert not out.is_error and ads_fake.requests == []
    assert [r["paper_id"] for r in out.metadata["results"]] == ["arxiv:2301.01234"]
    assert out.metadata["results"][0]["authors"] == ["Ž. Ivezić", "María José Núñez"]
    assert out.metadata["sources"]["ads"]["ok"] is False
    assert "ADS: FAILED (skipped: ADS_API_TOKEN is not set); arXiv: 1 of 1" in out.content


@pytest.mark.asyncio
async def test_one_source_erroring_is_reported(paper_services: ServiceContainer, ads_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    ads_fake.state["fail_all"] = 500
    out, _ = await run_search(paper_services, query="galaxy survey")
    assert not out.is_error and len(out.metadata["results"]) == 3
    assert "ADS: FAILED (NASA ADS server error (HTTP 500)" in out.content
    assert "HTTP 500" in out.metadata["sources"]["ads"]["error"]
    ads_fake.state["fail_all"] = 0
    arxiv_fake.state["fail_all"] = True
    out, _ = await run_search(paper_services, query="galaxy survey")
    assert not out.is_error and len(out.metadata["results"]) == 4
    assert "arXiv: FAILED (arXiv server error (HTTP 500)" in out.content


@pytest.mark.asyncio
async def test_all_sources_failing_is_an_error_result(paper_services: ServiceContainer, ads_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    ads_fake.state["fail_all"] = 500
    arxiv_fake.state["fail_all"] = True
    out, recorder = await run_search(paper_services, query="galaxy")
    assert out.is_error
    assert "failed on every source" in out.content and "ads:" in out.content and "arxiv:" in out.content
    assert recorder.of("tool_result")[0].is_error


@pytest.mark.asyncio
async def test_sources_run_concurrently_and_a_timeout_is_named(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    ads_fake.state["sleep"] = 0.6
    arxiv_fake.state["sleep"] = 3.0
    config = make_paper_config(astro_home, ads_fake, arxiv_fake)
    async with started(config, Tuning(http_timeout_secs=1.0)) as services:
        out, _ = await run_search(services, query="slowquery")
    assert not out.is_error
    assert "arXiv: FAILED (arXiv did not answer in time" in out.content
    assert out.metadata["sources"]["ads"]["ok"] is True
    # both requests reached their servers together: one after the other, the second would arrive after the
    # first's answer (ADS, 0.6 s) or its timeout (arXiv, 1 s)
    (ads_request,), (arxiv_request,) = ads_fake.requests, arxiv_fake.requests
    assert abs(ads_request.received - arxiv_request.received) < 0.4


@pytest.mark.asyncio
async def test_sources_sort_and_rows(paper_services: ServiceContainer, ads_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    out, _ = await run_search(paper_services, query="galaxy", sources=["ads"], sort="citations", rows=3)
    assert arxiv_fake.requests == []
    counts = [r["citation_count"] for r in out.metadata["results"]]
    assert counts == sorted(counts, reverse=True) and len(counts) == 3
    assert ads_fake.requests[-1].query["rows"] == ["3"]
    assert "arXiv: not queried" in out.content


@pytest.mark.asyncio
async def test_bad_arguments(paper_services: ServiceContainer) -> None:
    out, _ = await run_search(paper_services, query="   ")
    assert out.is_error and "non-empty query" in out.content
    out, _ = await run_search(paper_services, query="x", sources=["scholar"])
    assert out.is_error
    out, _ = await run_search(paper_services, query="nonexistentobject")
    assert not out.is_error and out.metadata["results"] == [] and "No papers matched" in out.content


@pytest.mark.asyncio
async def test_two_searches_in_one_turn_run_together(paper_services: ServiceContainer) -> None:
    executor = make_executor(paper_services, [SearchPapersTool(), GetPaperMetadataTool()], mode="auto")
    calls = [call("search_papers", json.dumps({"query": "galaxy"})), call("get_paper_metadata", json.dumps({"paper_id": "0805.2366"}))]
    results = await executor.execute(calls, make_ctx(paper_services, Recorder()))
    assert [r.output.is_error for r in results] == [False, False]
    assert "Library id: arxiv:0805.2366" in results[1].output.content


@pytest.mark.asyncio
async def test_rows_limits_the_merged_list_and_keeps_both_sources(paper_services: ServiceContainer) -> None:
    out, _ = await run_search(paper_services, query="galaxy", rows=4)
    ids = [r["paper_id"] for r in out.metadata["results"]]
    # Interleaved by rank: arXiv's own third hit (2301.01234) beats ADS's fourth (the sparse record).
    assert ids == ["arxiv:0805.2366", "arxiv:1111.0962", "arxiv:astro-ph/0601001", "arxiv:2301.01234"]
    assert out.content.startswith('4 papers for "galaxy" (ADS: 4 of 4; arXiv: 4 of 4).')
    out, _ = await run_search(paper_services, query="galaxy", rows=1, sort="date")
    assert [r["paper_id"] for r in out.metadata["results"]] == ["arxiv:2301.01234"]


@pytest.mark.asyncio
async def test_get_paper_metadata_refuses_an_answer_about_another_paper(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    """ADS answering a DOI it does not know with its nearest paper: the tool says so, stores nothing."""
    ads_fake.state["nearest"] = "2019ApJ...873..111I"
    executor = make_executor(paper_services, [GetPaperMetadataTool()], mode="auto")
    [result] = await executor.execute([call("get_paper_metadata", json.dumps({"paper_id": "10.1000/unknown.doi"}))],
                                      make_ctx(paper_services, Recorder()))
    assert result.output.is_error
    assert "different paper" in result.output.content and "LSST" in result.output.content
    assert await paper_services.library.list() == []
