"""BibTeX through the ADS export route (loopback fake speaking its JSON) and local entries for the rest."""

from __future__ import annotations

import time

import bibtexparser
import pytest

from astro_jupyter.services.bibtex import cited_identifiers, local_entry
from astro_jupyter.services.container import ServiceContainer
from astro_jupyter.store.papers import PaperRecord
from tests.fakes.ads_server import TOKEN
from tests.fakes.base import FakeServer

LSST = "2019ApJ...873..111I"
CALIFA = "2012A&A...538A...8S"


def exports(fake: FakeServer) -> list:
    return [r for r in fake.requests if r.path == "/export/bibtex"]


def parse_one(text: str):
    lib = bibtexparser.parse_string(text)
    assert not lib.failed_blocks and len(lib.entries) == 1, text
    return lib.entries[0]


@pytest.mark.asyncio
async def test_ads_entries_for_bibcodes_and_local_misc_for_arxiv_only(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    bib = paper_services.bibtex
    problems: list[str] = []
    papers = await bib.papers([LSST, "arXiv:2301.01234", "1111.0962"], problems)
    assert problems == []
    result = await bib.entries(papers)
    assert [(e.key, e.source) for e in result.entries] == [(LSST, "ads"), ("arXiv:2301.01234", "local"), (CALIFA, "ads")]
    [req] = exports(ads_fake)
    assert req.method == "POST" and req.headers["Authorization"] == f"Bearer {TOKEN}"
    assert req.json() == {"bibcode": [LSST, CALIFA]}  # the arXiv-only paper is not asked for
    lsst = parse_one(result.entries[0].text)
    assert lsst.entry_type.lower() == "article" and lsst.fields_dict["eprint"].value == "0805.2366"
    assert lsst.fields_dict["adsurl"].value.endswith(LSST)
    arxiv = parse_one(result.entries[1].text)
    assert arxiv.entry_type == "misc"
    assert arxiv.fields_dict["eprint"].value == "2301.01234" and arxiv.fields_dict["archivePrefix"].value == "arXiv"
    assert arxiv.fields_dict["year"].value == "2023" and arxiv.fields_dict["primaryClass"].value == "astro-ph.GA"
    whole = bibtexparser.parse_string(result.text)
    assert [e.key for e in whole.entries] == [LSST, "arXiv:2301.01234", CALIFA] and not whole.failed_blocks
    assert result.keys()["arxiv:0805.2366"] == LSST


@pytest.mark.asyncio
async def test_429_is_retried_after_retry_after(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    ads_fake.state.update(export_429=2, retry_after="0.2")
    text = await paper_services.ads.export_bibtex([LSST])
    sent = exports(ads_fake)
    assert len(sent) == 3 and text.startswith("@ARTICLE{" + LSST)
    assert all(b.received - a.received >= 0.2 for a, b in zip(sent, sent[1:]))


@pytest.mark.asyncio
async def test_429_with_a_far_reset_fails_clearly_and_falls_back(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    ads_fake.state.update(export_429=5, retry_after="3600")
    paper = await paper_services.library.resolve(LSST)
    result = await paper_services.bibtex.entries([paper])
    assert len(exports(ads_fake)) == 1  # no hour-long wait, no hammering
    assert [e.source for e in result.entries] == ["local"]
    assert "rate limit exceeded (HTTP 429)" in result.problems[0]
    entry = parse_one(result.entries[0].text)
    assert entry.key == LSST and entry.fields_dict["doi"].value == "10.3847/1538-4357/ab042c"


@pytest.mark.asyncio
async def test_remaining_zero_holds_the_next_request_until_the_reset(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    reset = time.time() + 3600
    ads_fake.state["export_remaining"] = (0, int(reset))
    await paper_services.ads.export_bibtex([LSST])
    paper = await paper_services.library.resolve(CALIFA)
    result = await paper_services.bibtex.entries([paper])
    assert len(exports(ads_fake)) == 1  # the second was never sent
    assert "X-RateLimit-Remaining: 0" in result.problems[0] and "resets at" in result.problems[0]
    assert result.entries[0].source == "local"


@pytest.mark.asyncio
async def test_remaining_zero_with_a_near_reset_waits_for_it(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    reset = int(time.time()) + 1
    ads_fake.state["export_remaining"] = (0, reset)
    await paper_services.ads.export_bibtex([LSST])
    ads_fake.state["export_remaining"] = (99, reset + 3600)
    await paper_services.ads.export_bibtex([CALIFA])
    second = exports(ads_fake)[1]
    assert second.json() == {"bibcode": [CALIFA]}
    assert time.time() >= reset  # it was sent after the reset, not before


@pytest.mark.asyncio
@pytest.mark.parametrize("kind, says", [("no_export", "without BibTeX"), ("garbage", "held no BibTeX entry")])
async def test_malformed_export_answer(paper_services: ServiceContainer, ads_fake: FakeServer, kind: str, says: str) -> None:
    ads_fake.state["export_malformed"] = kind
    paper = await paper_services.library.resolve(LSST)
    result = await paper_services.bibtex.entries([paper])
    assert says in result.problems[0]
    assert [(e.key, e.source) for e in result.entries] == [(LSST, "local")]
    assert parse_one(result.entries[0].text).fields_dict["journal"].value == "The Astrophysical Journal"


@pytest.mark.asyncio
async def test_unknown_bibcode_gets_a_local_entry_and_a_note(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    unknown = PaperRecord(id="bib:2099Natur.999..123Z", bibcode="2099Natur.999..123Z", title="Not in ADS",
                          authors=["Zed, A."], year=2099, journal="Nature")
    known = await paper_services.library.resolve(LSST)
    result = await paper_services.bibtex.entries([unknown, known])
    assert [(e.key, e.source) for e in result.entries] == [("2099Natur.999..123Z", "local"), (LSST, "ads")]
    assert result.problems == ["NASA ADS has no BibTeX for 2099Natur.999..123Z: entry built from the library's metadata"]
    alone = await paper_services.bibtex.entries([unknown])  # every bibcode unknown: ADS answers 404
    assert "no such resource (HTTP 404): no result from solr" in alone.problems[0]
    assert alone.entries[0].source == "local"


@pytest.mark.asyncio
async def test_a_record_that_was_not_asked_for_is_refused(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    ads_fake.state["export_swap"] = {LSST: CALIFA}
    paper = await paper_services.library.resolve(LSST)
    result = await paper_services.bibtex.entries([paper])
    assert any(f"not asked for ({CALIFA})" in p for p in result.problems)
    assert [(e.key, e.source) for e in result.entries] == [(LSST, "local")]
    assert "CALIFA" not in result.text


@pytest.mark.asyncio
async def test_no_token_builds_local_entries(paper_services: ServiceContainer, ads_fake: FakeServer) -> None:
    paper = await paper_services.library.resolve(LSST)
    paper_services.config.ads_token = ""
    result = await paper_services.bibtex.entries([paper])
    assert exports(ads_fake) == [] and result.entries[0].source == "local"
    assert "ADS_API_TOKEN is not set" in result.problems[0]


def test_local_entry_cannot_be_broken_out_of() -> None:
    record = PaperRecord(id="arxiv:2301.99999", arxiv_id="2301.99999", title="A } , note = {pwned} & 50% of $z_2$",
                         authors=["Ødegaard, Ingrid", "Evil}, x = {y"], year=2023)
    entry = parse_one(local_entry(record))
    assert set(entry.fields_dict) == {"author", "title", "year", "eprint", "archivePrefix", "howpublished", "url"}
    assert entry.fields_dict["title"].value == r"A , note = pwned \& 50\% of $z_2$"
    assert entry.fields_dict["author"].value == r"{\O}degaard, Ingrid and Evil, x = y"


def test_cited_identifiers_in_an_answer() -> None:
    text = ("LSST (2019ApJ...873..111I) builds on arXiv:0805.2366v5; CALIFA is 2012A&A...538A...8S, "
            "see doi 10.1073/pnas.15.3.168. Not ids: 2019.12345, 12345678901234567890.")
    assert cited_identifiers(text) == [LSST, "arXiv:0805.2366", CALIFA, "10.1073/pnas.15.3.168"]
