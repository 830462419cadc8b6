"""object_papers: Sesame fake → SIMBAD-shaped tables on a real DaCHS (named ``simbad`` in tap_services)
→ the ADS fake for metadata; through ``AstroApp.run_tool``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from astro_jupyter.agent.tools.data.object_papers import id_variants
from astro_jupyter.app import AstroApp
from astro_jupyter.config import AstroConfig
from tests.fakes import dachs
from tests.fakes.ads_server import TOKEN, ads_server

pytestmark = pytest.mark.skipif(not dachs.installed(), reason="GAVO DaCHS is not installed (.ci/run installs gavodachs2-server)")


@pytest_asyncio.fixture
async def make_app(tmp_path: Path, dachs_server: Any, sesame_server: Any) -> AsyncIterator[Any]:
    apps: list[AstroApp] = []

    async def make(**extra: Any) -> AstroApp:
        urls = {"sesame": sesame_server.url, **extra.pop("service_urls", {})}
        cfg = AstroConfig(home=str(tmp_path / "home"), project_root=str(tmp_path), service_urls=urls,
                          tap_services={"simbad": dachs_server.tap_url}, openai_base_url="http://127.0.0.1:9/v1", **extra)
        app = AstroApp(cfg, source="cli")
        await app.start()
        apps.append(app)
        return app

    yield make
    for app in apps:
        await app.close()


def test_identifier_spellings_include_simbads_padding() -> None:
    assert id_variants("M 87", "m87") [:4] == ["M 87", "M  87", "M   87", "m87"]
    assert "NGC  1275" in id_variants("NGC 1275")


@pytest.mark.asyncio
async def test_papers_of_an_object_merged_with_ads_metadata(make_app: Any) -> None:
    with ads_server() as ads:
        app = await make_app(service_urls={"ads": ads.url}, ads_token=TOKEN)
        run = await app.run_tool("object_papers", {"target": "M 87"})
    assert not run.is_error, run.content
    papers = run.metadata["papers"]
    assert [p["bibcode"] for p in papers] == ["2030XYZ....1....1Q", "2019ApJ...873..111I", "1929PNAS...15..168H"]
    lsst = papers[1]
    assert lsst["in_ads"] and lsst["authors"] and lsst["authors"][0].startswith("Ivezi")
    assert lsst["title"].startswith("LSST: From Science Drivers")  # ADS's title replaces SIMBAD's short one
    assert papers[0]["in_ads"] is False and papers[0]["title"] == "A paper ADS does not know"
    assert "2012A&A...538A...8S" not in run.content  # M 31's paper is not M 87's
    assert "ADS does not know 1 of these: 2030XYZ....1....1Q" in run.content
    assert 'download_paper(paper_id="<bibcode>")' in run.content


@pytest.mark.asyncio
async def test_without_an_ads_token_the_list_is_simbads(make_app: Any) -> None:
    app = await make_app(ads_token="")
    run = await app.run_tool("object_papers", {"target": "M 87"})
    assert not run.is_error and len(run.metadata["papers"]) == 3
    assert "No ADS token" in run.content and run.metadata["papers"][1]["title"] == "LSST: from science drivers"


@pytest.mark.asyncio
async def test_unknown_object_and_bad_limit(make_app: Any) -> None:
    app = await make_app(ads_token="")
    unknown = await app.run_tool("object_papers", {"target": "Planet Nine"})
    assert unknown.is_error and "not found by CDS Sesame" in unknown.content
    bad = await app.run_tool("object_papers", {"target": "M 87", "limit": 0})
    assert bad.is_error
