"""The ADS client against the loopback fake: request shape, record mapping, errors people can act on."""

from __future__ import annotations

from pathlib import Path

import pytest

from astro_jupyter.config import AstroConfig
from astro_jupyter.errors import ConfigError, NotFoundError, ServiceError, ServiceTimeoutError
from astro_jupyter.services.ads import AdsClient, to_ads_query
from astro_jupyter.services.http import make_http_client
from astro_jupyter.services.identifiers import parse_identifier
from tests.fakes.ads_server import TOKEN
from tests.fakes.base import FakeServer


def _config(home: Path, fake: FakeServer, **kw: object) -> AstroConfig:
    return AstroConfig(home=str(home), service_urls={"ads": fake.url}, ads_token=TOKEN, **kw)


@pytest.mark.asyncio
async def test_search_sends_solr_params_and_bearer_token(astro_home: Path, ads_fake: FakeServer) -> None:
    config = _config(astro_home, ads_fake)
    async with make_http_client(5.0) as http:
        result = await AdsClient(config, http).search("galaxy survey", rows=2, start=0, sort="citations")
    req = ads_fake.requests[-1]
    assert req.path == "/search/query"
    assert req.headers["Authorization"] == f"Bearer {TOKEN}"
    assert req.query["q"] == ["galaxy survey"]
    assert req.query["rows"] == ["2"] and req.query["start"] == ["0"]
    assert req.query["sort"] == ["citation_count desc"]
    assert "bibcode" in req.query["fl"][0] and "identifier" in req.query["fl"][0]
    assert result.num_found == 4
    assert [r.bibcode for r in result.records] == ["2019ApJ...873..111I", "2012A&A...538A...8S"]


@pytest.mark.asyncio
async def test_record_mapping_unicode_arxiv_id_and_missing_fields(astro_home: Path, ads_fake: FakeServer) -> None:
    config = _config(astro_home, ads_fake)
    async with make_http_client(5.0) as http:
        ads = AdsClient(config, http)
        lsst = await ads.get(parse_identifier("0805.2366v5"))
        old = await ads.get(parse_identifier("2006ApJ...640L..35M"))
        sparse = await ads.get(parse_identifier("2021MNRAS.500.1111Z"))
        hubble = await ads.get(parse_identifier("10.1073/pnas.15.3.168"))
    assert lsst.title.startswith("LSST: From Science Drivers")
    assert lsst.authors[0] == "Ivezić, Željko"
    assert (lsst.arxiv_id, lsst.doi, lsst.year) == ("0805.2366", "10.3847/1538-4357/ab042c", 2019)
    assert lsst.journal == "The Astrophysical Journal"
    assert lsst.citation_count == 3412 and "surveys" in lsst.keywords
    assert old.arxiv_id == "astro-ph/0601001" and old.doi is None
    assert sparse.title == "Notes on a galaxy survey with sparse metadata"
    assert (sparse.authors, sparse.abstract, sparse.doi, sparse.citation_count) == ([], "", None, None)
    assert hubble.arxiv_id is None and hubble.bibcode == "1929PNAS...15..168H"


@pytest.mark.asyncio
async def test_references_and_citations(astro_home: Path, ads_fake: FakeServer) -> None:
    config = _config(astro_home, ads_fake)
    async with make_http_client(5.0) as http:
        ads = AdsClient(config, http)
        refs = await ads.references("2019ApJ...873..111I")
        cites = await ads.citations("1929PNAS...15..168H")
    assert ads_fake.requests[0].query["q"] == ["references(bibcode:2019ApJ...873..111I)"]
    assert {r.bibcode for r in refs.records} == {"1929PNAS...15..168H", "2012A&A...538A...8S"}
    assert cites.num_found == 3


@pytest.mark.asyncio
async def test_unknown_paper_is_not_found(astro_home: Path, ads_fake: FakeServer) -> None:
    config = _config(astro_home, ads_fake)
    async with make_http_client(5.0) as http:
        ads = AdsClient(config, http)
        empty = await ads.search("nonexistentobject xyzzy")
        with pytest.raises(NotFoundError, match="no paper"):
            await ads.get(parse_identifier("10.9999/does-not-exist"))
    assert empty.num_found == 0 and empty.records == []


@pytest.mark.asyncio
async def test_missing_token_names_the_variable(astro_home: Path, ads_fake: FakeServer) -> None:
    config = AstroConfig(home=str(astro_home), service_urls={"ads": ads_fake.url}, ads_token="")
    async with make_http_client(5.0) as http:
        ads = AdsClient(config, http)
        assert not ads.configured
        with pytest.raises(ConfigError, match="ADS_API_TOKEN"):
            await ads.search("galaxy")
    assert ads_fake.requests == []


@pytest.mark.asyncio
async def test_http_errors_are_mapped(astro_home: Path, ads_fake: FakeServer) -> None:
    bad = AstroConfig(home=str(astro_home), service_urls={"ads": ads_fake.url}, ads_token="wrong")
    async with make_http_client() as http:
        with pytest.raises(ServiceError, match=r"refused the credentials \(HTTP 401\).*ADS_API_TOKEN"):
            await AdsClient(bad, http).search("galaxy")
    config = _config(astro_home, ads_fake)
    async with make_http_client(5.0) as http:
        ads = AdsClient(config, http)
        with pytest.raises(ServiceError, match=r"server error \(HTTP 500\)"):
            await ads.search("cause500")
        with pytest.raises(ServiceError, match=r"rate limit exceeded \(HTTP 429\).*1767225600"):
            await ads.search("ratelimit")


@pytest.mark.asyncio
async def test_timeout_is_a_timeout_error(astro_home: Path, ads_fake: FakeServer) -> None:
    ads_fake.state["sleep"] = 1.5
    config = _config(astro_home, ads_fake)
    async with make_http_client(0.3) as http:
        with pytest.raises(ServiceTimeoutError, match="did not answer in time"):
            await AdsClient(config, http).search("slowquery")


@pytest.mark.asyncio
async def test_esource_links_pdf_first(astro_home: Path, ads_fake: FakeServer) -> None:
    ads_fake.state["esource"] = {
        "2019ApJ...873..111I": [
            {"url": "https://iopscience.iop.org/article/10.3847/1538-4357/ab042c", "link_type": "ESOURCE|PUB_HTML"},
            {"url": "https://arxiv.org/pdf/0805.2366", "link_type": "ESOURCE|EPRINT_PDF"},
        ]
    }
    config = _config(astro_home, ads_fake)
    async with make_http_client(5.0) as http:
        links = await AdsClient(config, http).esource_links("2019ApJ...873..111I")
        with pytest.raises(NotFoundError):
            await AdsClient(config, http).esource_links("1929PNAS...15..168H")
        ads_fake.state["esource"]["2012A&A...538A...8S"] = [{"url": "https://www.aanda.org/x.pdf", "link_type": "ESOURCE|PUB_PDF"}]
        assert await AdsClient(config, http).esource_links("2012A&A...538A...8S") == [("ESOURCE|PUB_PDF", "https://www.aanda.org/x.pdf")]
    assert ads_fake.requests[-1].path == "/resolver/2012A%26A...538A...8S/esource"
    assert links[0] == ("ESOURCE|EPRINT_PDF", "https://arxiv.org/pdf/0805.2366")
    assert len(links) == 2


def test_arxiv_style_queries_are_translated() -> None:
    assert to_ads_query("au:Ivezic AND ti:LSST") == "author:Ivezic AND title:LSST"
    assert to_ads_query("all:galaxy cat:astro-ph.GA") == "galaxy arxiv_class:astro-ph.GA"
    assert to_ads_query('author:"Sánchez, S." year:2012') == 'author:"Sánchez, S." year:2012'
    assert to_ads_query("citations(bibcode:2019ApJ...873..111I)") == "citations(bibcode:2019ApJ...873..111I)"
