"""Downloads against the loopback file server: channels in order, PDF check, atomic move, guard, cancel."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer
from astro_jupyter.services.download import DownloadFailed
from astro_jupyter.store.papers import PaperRecord
from astro_jupyter.services.netguard import BlockedAddressError, check_url, is_public_address
from tests.fakes.base import FakeServer
from tests.fakes.file_server import Route, landing_page, make_pdf
from tests.waiting import until
from tests.fakes.library_env import make_paper_config, started

REPO = Path(__file__).resolve().parents[2]


def papers_files(config: AstroConfig) -> list[str]:
    return sorted(str(p.relative_to(config.papers_dir)) for p in config.papers_dir.rglob("*") if p.is_file())


class ProgressLog:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, done: int | None = None, total: int | None = None, message: str = "") -> None:
        self.calls.append({"done": done, "total": total, "message": message})


@pytest.mark.asyncio
async def test_arxiv_channel_streams_verifies_and_moves(paper_services: ServiceContainer, file_fake: FakeServer) -> None:
    pdf = make_pdf("LSST", pages=30, extra_text="x" * 2000)
    file_fake.state["routes"]["/pdf/0805.2366"] = Route(body=pdf)
    progress = ProgressLog()
    result = await paper_services.downloads.download("arXiv:0805.2366v5", progress=progress)
    config = paper_services.config
    assert result.channel == "arxiv" and result.url == f"{file_fake.url}/pdf/0805.2366"
    assert result.path == config.papers_dir / "arxiv_0805.2366.pdf"
    assert result.path.read_bytes() == pdf and result.size == len(pdf)
    assert papers_files(config) == ["arxiv_0805.2366.pdf"]  # no temp file left behind
    paper = await paper_services.library.get("0805.2366")
    assert paper.state == "downloaded" and paper.pdf_path == str(result.path)
    assert paper.title.startswith("LSST")  # metadata fetched from the ADS/arXiv fakes on the way
    final = progress.calls[-1]
    assert final["done"] == len(pdf) and final["total"] == len(pdf)
    # A second call is answered from the library without touching the network.
    hits = len(file_fake.requests)
    again = await paper_services.downloads.download("0805.2366")
    assert again.already and len(file_fake.requests) == hits


@pytest.mark.asyncio
async def test_fallback_through_ads_doi_and_publisher(paper_services: ServiceContainer, file_fake: FakeServer, ads_fake: FakeServer) -> None:
    base = file_fake.url
    pdf = make_pdf("Published version")
    routes = file_fake.state["routes"]
    routes["/pdf/0805.2366"] = Route(body=landing_page(title="arXiv is busy"), content_type="text/html")
    routes["/ads/eprint.pdf"] = Route(status=500, body=b"oops", content_type="text/plain")
    routes["/doi/10.3847/1538-4357/ab042c"] = Route(status=302, location=f"{base}/article/lsst")
    routes["/article/lsst"] = Route(body=landing_page("/article/lsst/pdf", "LSST"), content_type="text/html; charset=utf-8")
    routes["/article/lsst/pdf"] = Route(status=303, location="/files/lsst-final.pdf")
    routes["/files/lsst-final.pdf"] = Route(body=pdf)
    ads_fake.state["esource"] = {"2019ApJ...873..111I": [{"url": f"{base}/ads/eprint.pdf", "link_type": "ESOURCE|EPRINT_PDF"}]}
    result = await paper_services.downloads.download("2019ApJ...873..111I")
    assert [(a.channel, a.ok) for a in result.attempts] == [
        ("arxiv", False),
        ("ads:ESOURCE|EPRINT_PDF", False),
        ("doi", False),
        ("publisher", True),
    ]
    assert "not a PDF" in result.attempts[0].error and "HTML" in result.attempts[0].error
    assert result.attempts[1].error == "HTTP 500" and result.attempts[1].status == 500
    assert result.channel == "publisher" and result.url == f"{base}/files/lsst-final.pdf"
    assert result.path.read_bytes() == pdf
    assert papers_files(paper_services.config) == ["arxiv_0805.2366.pdf"]


@pytest.mark.asyncio
async def test_every_channel_failing_keeps_the_library_clean(paper_services: ServiceContainer, file_fake: FakeServer) -> None:
    file_fake.state["routes"]["/pdf/1111.0962"] = Route(body=b"<html>captcha</html>", content_type="text/html")
    with pytest.raises(DownloadFailed) as info:
        await paper_services.downloads.download("1111.0962")
    attempts = info.value.attempts
    assert [a.channel for a in attempts] == ["arxiv", "ads", "doi"]
    assert "lists no full-text links" in attempts[1].error or "HTTP 404" in attempts[1].error
    assert attempts[2].error == "HTTP 404"
    assert "every channel failed" in str(info.value)
    assert papers_files(paper_services.config) == []
    assert (await paper_services.library.get("1111.0962")).state == "metadata"


@pytest.mark.asyncio
async def test_no_ads_token_is_a_recorded_skip(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer, file_fake: FakeServer) -> None:
    config = make_paper_config(astro_home, ads_fake, arxiv_fake, file_fake, ads_token="")
    async with started(config) as services:
        await services.library.store(PaperRecord(bibcode="2006ApJ...640L..35M", title="Galaxy clustering"))
        with pytest.raises(DownloadFailed) as info:
            await services.downloads.download("bib:2006ApJ...640L..35M")
        assert info.value.attempts[0].channel == "ads"
        assert "ADS_API_TOKEN" in info.value.attempts[0].error


@pytest.mark.asyncio
async def test_private_targets_refused_unless_allowed(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer, file_fake: FakeServer) -> None:
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(body=make_pdf())
    config = make_paper_config(astro_home, ads_fake, arxiv_fake, file_fake, download_allowed_hosts=[])
    async with started(config) as services:
        with pytest.raises(DownloadFailed) as info:
            await services.downloads.download("2301.01234")
    assert file_fake.requests == []  # the guard stopped it before any connection
    assert all("loopback/private" in a.error for a in info.value.attempts if a.channel in ("arxiv", "doi"))
    assert "127.0.0.1" in info.value.attempts[0].error
    assert papers_files(config) == []


@pytest.mark.asyncio
async def test_redirect_hops_are_checked_too(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer, file_fake: FakeServer) -> None:
    """127.0.0.1 is explicitly allowed; its redirect to ``localhost`` (the same machine by another
    name) is not, so the guard must stop the second hop before it is requested."""
    port = file_fake.port
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(status=302, location=f"http://localhost:{port}/real.pdf")
    file_fake.state["routes"]["/real.pdf"] = Route(body=make_pdf())
    config = make_paper_config(
        astro_home, ads_fake, arxiv_fake, file_fake, download_allowed_hosts=["127.0.0.1"]
    )
    async with started(config) as services:
        with pytest.raises(DownloadFailed) as info:
            await services.downloads.download("2301.01234")
    arxiv_attempt = info.value.attempts[0]
    assert arxiv_attempt.channel == "arxiv" and "localhost resolves to" in arxiv_attempt.error
    assert [r.path for r in file_fake.requests] == ["/pdf/2301.01234"]  # the redirect target never asked
    assert papers_files(config) == []


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("192.168.0.10", False),
        ("172.16.5.4", False),
        ("169.254.169.254", False),
        ("0.0.0.0", False),
        ("::1", False),
        ("fe80::1", False),
        ("fc00::1", False),
        ("::ffff:127.0.0.1", False),
        ("100.64.0.1", False),
        ("224.0.0.1", False),
        ("93.184.216.34", True),
        ("2606:4700:4700::1111", True),
    ],
)
def test_address_classification(address: str, public: bool) -> None:
    assert is_public_address(address) is public


@pytest.mark.asyncio
async def test_check_url() -> None:
    for url in ("http://localhost:8888/api", "http://169.254.169.254/latest/meta-data", "http://[::1]/x", "http://10.0.0.1/a.pdf"):
        with pytest.raises(BlockedAddressError):
            await check_url(url, allow_private=False)
        await check_url(url, allow_private=True)
    await check_url("https://93.184.216.34/paper.pdf", allow_private=False)
    with pytest.raises(Exception, match="only http and https"):
        await check_url("file:///etc/passwd", allow_private=True)


@pytest.mark.asyncio
async def test_cancel_mid_download_leaves_no_partial_file(paper_services: ServiceContainer, file_fake: FakeServer) -> None:
    body = make_pdf() + b"%" * 400_000
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(body=body, delay=0.02, chunk_size=8192)
    progress = ProgressLog()
    task = asyncio.create_task(paper_services.downloads.download("2301.01234", progress=progress))
    for _ in range(200):
        await asyncio.sleep(0.02)
        if any((c["done"] or 0) > 0 for c in progress.calls):
            break
    partial = list(paper_services.downloads.partial_dir.glob("*.part"))
    assert len(partial) == 1 and partial[0].stat().st_size > 0  # it really was half-way
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert papers_files(paper_services.config) == []
    assert (await paper_services.library.get("2301.01234")).state == "metadata"


@pytest.mark.asyncio
async def test_truncated_and_oversized_bodies_fail_the_channel(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer, file_fake: FakeServer) -> None:
    pdf = make_pdf()
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(body=pdf, declared_length=len(pdf) + 5000, delay=0.001)
    file_fake.state["routes"]["/pdf/0805.2366"] = Route(body=pdf + b" " * 5000)
    config = make_paper_config(astro_home, ads_fake, arxiv_fake, file_fake, download_max_bytes=len(pdf) + 100)
    async with started(config) as services:
        with pytest.raises(DownloadFailed) as truncated:
            await services.downloads.download("2301.01234")
        with pytest.raises(DownloadFailed) as too_big:
            await services.downloads.download("0805.2366")
    assert truncated.value.attempts[0].channel == "arxiv" and truncated.value.attempts[0].error
    assert "limit" in too_big.value.attempts[0].error
    assert papers_files(config) == []


_KILLED_DOWNLOAD = """
import asyncio, sys
from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer

async def main():
    config = AstroConfig(home=sys.argv[1], service_urls={"arxiv_pdf": sys.argv[2], "arxiv": sys.argv[3]},
                         download_allowed_hosts=["127.0.0.1"], ads_token="")
    services = await ServiceContainer(config).start()
    await services.downloads.download("2301.01234")

asyncio.run(main())
"""


@pytest.mark.asyncio
async def test_killed_download_is_swept_before_the_next(paper_services: ServiceContainer, file_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    config = paper_services.config
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(body=make_pdf() + b"%" * 2_000_000, delay=0.02, chunk_size=8192)
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_DOWNLOAD, config.home, f"{file_fake.url}/pdf", f"{arxiv_fake.url}/api/query"],
        cwd=REPO,
    )
    try:
        # the child is half-way: its part file holds bytes
        await until(lambda: any(p.stat().st_size > 0 for p in paper_services.downloads.partial_dir.glob("*.part")),
                    "the killed child's part file to hold bytes")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    leftovers = list(paper_services.downloads.partial_dir.glob("*.part"))
    assert len(leftovers) == 1 and leftovers[0].name.startswith(f"{proc.pid}-")
    assert papers_files(config) == []  # the killed download never touched papers/
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(body=make_pdf("fine"))
    result = await paper_services.downloads.download("2301.01234")
    assert result.path.is_file()
    assert papers_files(config) == ["arxiv_2301.01234.pdf"]
    assert list(paper_services.downloads.partial_dir.iterdir()) == []  # the dead process's temp file swept


@pytest.mark.asyncio
async def test_metadata_outage_still_downloads_by_identifier(paper_services: ServiceContainer, file_fake: FakeServer, ads_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    ads_fake.state["fail_all"] = 500
    arxiv_fake.state["fail_all"] = True
    with pytest.raises(DownloadFailed) as info:
        await paper_services.downloads.download("2405.00001")
    assert "metadata lookup failed" in str(info.value)
    assert await paper_services.library.list() == []  # a failed download leaves no stub entry
    file_fake.state["routes"]["/pdf/2405.00001"] = Route(body=make_pdf("JWST"))
    result = await paper_services.downloads.download("2405.00001v1")
    assert result.channel == "arxiv" and "metadata lookup failed" in result.notes[0]
    stored = await paper_services.library.get("2405.00001")
    assert stored.state == "downloaded" and stored.arxiv_version == "v1" and stored.pdf_path == str(result.path)
