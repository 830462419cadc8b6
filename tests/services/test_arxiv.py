"""The arXiv client against the loopback Atom fake: parsing, id normalisation, errors, rate limiting."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from astro_jupyter.config import AstroConfig
from astro_jupyter.errors import NotFoundError, ServiceError, ServiceTimeoutError
from astro_jupyter.services.arxiv import RATE_LIMITER, ArxivClient, RateLimiter, build_search_query, parse_feed
from astro_jupyter.services.container import ServiceContainer
from astro_jupyter.services.http import make_http_client
from tests.fakes.arxiv_server import DATA
from tests.fakes.base import FakeServer


def _config(home: Path, fake: FakeServer, **kw: object) -> AstroConfig:
    settings: dict[str, object] = {"home": str(home), "service_urls": {"arxiv": f"{fake.url}/api/query"}}
    settings.update(kw)
    return AstroConfig(**settings)


@pytest.mark.asyncio
async def test_search_parses_entries(astro_home: Path, arxiv_fake: FakeServer) -> None:
    config = _config(astro_home, arxiv_fake)
    async with make_http_client() as http:
        result = await ArxivClient(config, http, limiter=RateLimiter()).search("dwarf galaxy", max_results=5)
    req = arxiv_fake.requests[-1]
    assert req.path == "/api/query"
    assert req.query["search_query"] == ["all:dwarf AND all:galaxy"]
    assert req.query["max_results"] == ["5"]
    assert result.total == 1
    rec = result.records[0]
    assert (rec.arxiv_id, rec.arxiv_version) == ("2301.01234", "v2")
    assert rec.title == "Quenching of dwarf galaxy satellites in the Local Volume"
    assert rec.authors == ["Ž. Ivezić", "María José Núñez"]
    assert rec.year == 2023
    assert rec.doi is None and rec.journal == ""
    assert rec.metadata["primary_category"] == "astro-ph.GA"
    assert rec.metadata["pdf_url"] == "http://arxiv.org/pdf/2301.01234v2"


@pytest.mark.asyncio
async def test_id_list_fetch_with_versions_and_old_style(astro_home: Path, arxiv_fake: FakeServer) -> None:
    config = _config(astro_home, arxiv_fake)
    async with make_http_client() as http:
        client = ArxivClient(config, http, limiter=RateLimiter())
        records = await client.fetch(["0805.2366v5", "astro-ph/0601001"])
        lsst = await client.get("0805.2366")
    assert arxiv_fake.requests[0].query["id_list"] == ["0805.2366v5,astro-ph/0601001"]
    assert [r.arxiv_id for r in records] == ["0805.2366", "astro-ph/0601001"]
    assert records[1].authors == ["Jörg Müller", "Ingrid Ødegaard", "Seán O'Brien"]
    assert lsst.doi == "10.3847/1538-4357/ab042c" and lsst.journal == "ApJ 873, 111 (2019)"
    assert lsst.title == "LSST: from Science Drivers to Reference Design and Anticipated Data Products"
    assert lsst.abstract.startswith("We describe here") and "\n" not in lsst.abstract


@pytest.mark.asyncio
async def test_unknown_and_malformed_ids(astro_home: Path, arxiv_fake: FakeServer) -> None:
    config = _config(astro_home, arxiv_fake)
    async with make_http_client() as http:
        client = ArxivClient(config, http, limiter=RateLimiter())
        with pytest.raises(NotFoundError, match="arXiv has no paper 2999.99999"):
            await client.get("2999.99999")
        with pytest.raises(ServiceError, match="incorrect id format for notanid"):
            await client.fetch(["notanid"])
        empty = await client.search("nonexistentobject")
    assert empty.total == 0 and empty.records == []


@pytest.mark.asyncio
async def test_server_error_and_timeout(astro_home: Path, arxiv_fake: FakeServer) -> None:
    arxiv_fake.state["sleep"] = 1.5
    config = _config(astro_home, arxiv_fake)
    async with make_http_client(0.3) as http:
        client = ArxivClient(config, http, limiter=RateLimiter())
        with pytest.raises(ServiceError, match=r"arXiv server error \(HTTP 500\)"):
            await client.search("cause500")
        with pytest.raises(ServiceTimeoutError, match="arXiv did not answer in time"):
            await client.search("slowquery")


class _RecordingLimiter(RateLimiter):
    """The real limiter, noting when each caller asked and when it was let through."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[float] = []
        self.started: list[float] = []

    async def wait(self, interval: float) -> None:
        self.asked.append(time.monotonic())
        await super().wait(interval)
        self.started.append(time.monotonic())


@pytest.mark.asyncio
async def test_rate_limiter_spaces_concurrent_requests(astro_home: Path, arxiv_fake: FakeServer) -> None:
    config = _config(astro_home, arxiv_fake)
    limiter = _RecordingLimiter()
    async with make_http_client() as http:
        clients = [ArxivClient(config, http, limiter=limiter, min_interval=0.2) for _ in range(2)]
        await asyncio.gather(*(clients[i % 2].search("galaxy") for i in range(4)))
    assert len(arxiv_fake.state["times"]) == 4  # every request reached arXiv
    # the n-th request (shared by both clients) starts no sooner than n intervals after the first ask;
    # a loaded machine only makes starts later, so this holds however busy it is
    first = min(limiter.asked)
    for n, started in enumerate(sorted(limiter.started)):
        assert started >= first + n * 0.2 - 0.01, (n, started - first)


def test_arxivs_three_second_rule_binds_arxivs_own_hosts_only(astro_home: Path) -> None:
    """arXiv's API terms ask for 3 s between requests; a mirror or local service named in service_urls is not arXiv."""
    assert ArxivClient(AstroConfig(home=str(astro_home)), None).min_interval == 3.0  # type: ignore[arg-type]
    mirror = AstroConfig(home=str(astro_home), service_urls={"arxiv": "http://127.0.0.1:8080/api/query"})
    assert ArxivClient(mirror, None).min_interval == 0.0  # type: ignore[arg-type]
    assert ArxivClient(mirror, None, min_interval=0.5).min_interval == 0.5  # type: ignore[arg-type]


def test_parse_feed_rejects_non_atom() -> None:
    with pytest.raises(ServiceError, match="malformed XML"):
        parse_feed(b"<html><body>oops")
    with pytest.raises(ServiceError, match="not an Atom feed"):
        parse_feed(b"<rss></rss>")
    assert parse_feed((DATA / "entries.xml").read_bytes()).total == 5


def test_build_search_query() -> None:
    assert build_search_query("dark matter") == "all:dark AND all:matter"
    assert build_search_query("au:Ivezic AND ti:LSST") == "au:Ivezic AND ti:LSST"
    assert build_search_query("  ") == ""
    assert build_search_query('author:"^Ivezić" title:LSST year:2019') == 'au:"Ivezić" AND ti:LSST'
    assert build_search_query('"dark matter" halo') == 'all:"dark matter" AND all:halo'


@pytest.mark.asyncio
async def test_every_container_shares_the_process_limiter(astro_home: Path) -> None:
    first = ServiceContainer(AstroConfig(home=str(astro_home / "a")))
    second = ServiceContainer(AstroConfig(home=str(astro_home / "b")))
    try:
        assert first.arxiv.limiter is RATE_LIMITER and second.arxiv.limiter is RATE_LIMITER
    finally:
        await first.close()
        await second.close()
