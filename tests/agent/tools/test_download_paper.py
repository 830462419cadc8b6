"""download_paper through the real executor: progress events, fallbacks, refusals, cancellation."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from astro_jupyter.agent.tools.astro.download import DownloadPaperTool, tools
from astro_jupyter.agent.tools.base import InterruptBehavior
from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer
from tests.agent.executor_support import Recorder, call, make_ctx, make_executor
from tests.fakes.base import FakeServer
from tests.fakes.file_server import Route, landing_page, make_pdf
from tests.fakes.library_env import make_paper_config, started


async def run(services: ServiceContainer, recorder: Recorder | None = None, **args: Any) -> Any:
    recorder = recorder or Recorder()
    executor = make_executor(services, [DownloadPaperTool()], mode="auto")
    [result] = await executor.execute([call("download_paper", json.dumps(args))], make_ctx(services, recorder))
    return result.output


def test_flags() -> None:
    [tool] = tools(AstroConfig())
    assert tool.name == "download_paper"
    assert not tool.is_concurrency_safe({"paper_id": "x"}) and not tool.is_readonly
    assert tool.interrupt_behavior is InterruptBehavior.CANCEL
    assert tool.causes_sibling_abort and tool.defer_loading


@pytest.mark.asyncio
async def test_download_reports_progress_and_lands_in_papers(paper_services: ServiceContainer, file_fake: FakeServer) -> None:
    pdf = make_pdf("Dwarf galaxies", pages=40, extra_text="y" * 3000)
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(body=pdf, chunk_size=65536, delay=0.001)
    recorder = Recorder()
    out = await run(paper_services, recorder, paper_id="https://arxiv.org/abs/2301.01234v2")
    assert not out.is_error, out.content
    path = paper_services.config.papers_dir / "arxiv_2301.01234.pdf"
    assert path.read_bytes() == pdf
    assert out.content.startswith('Downloaded arxiv:2301.01234 "Quenching of dwarf galaxy satellites in the Local Volume"')
    assert f"Saved to {path}." in out.content and 'parse_paper(paper_id="arxiv:2301.01234")' in out.content
    assert out.metadata["channel"] == "arxiv" and out.metadata["bytes"] == len(pdf) and out.metadata["state"] == "downloaded"
    progress = [e.progress for e in recorder.of("tool_progress")]
    assert progress and progress[-1]["done"] == len(pdf) and progress[-1]["total"] == len(pdf)
    dones = [p["done"] for p in progress if p["done"]]
    assert dones == sorted(dones)
    again = await run(paper_services, paper_id="arxiv:2301.01234")
    assert again.content.startswith("Already in the library: arxiv:2301.01234")


@pytest.mark.asyncio
async def test_failed_channels_are_listed(paper_services: ServiceContainer, file_fake: FakeServer) -> None:
    file_fake.state["routes"]["/pdf/0805.2366"] = Route(body=landing_page(title="Just a moment..."), content_type="text/html")
    out = await run(paper_services, paper_id="10.3847/1538-4357/ab042c")
    assert out.is_error
    lines = out.content.splitlines()
    assert lines[0] == "Could not download arxiv:0805.2366: every channel failed."
    assert lines[1].startswith(f"- arxiv {file_fake.url}/pdf/0805.2366: not a PDF: an HTML page")
    assert any(line.startswith("- ads ") for line in lines) and lines[-1].endswith("HTTP 404")
    assert [a["channel"] for a in out.metadata["attempts"]] == ["arxiv", "ads", "doi"]
    assert not list(paper_services.config.papers_dir.glob("*.pdf"))


@pytest.mark.asyncio
async def test_private_address_refused_by_default(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer, file_fake: FakeServer) -> None:
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(body=make_pdf())
    config = make_paper_config(astro_home, ads_fake, arxiv_fake, file_fake, download_allowed_hosts=[])
    async with started(config) as services:
        out = await run(services, paper_id="2301.01234")
    assert out.is_error and "refusing to fetch" in out.content and "ASTRO_DOWNLOAD_ALLOWED_HOSTS" in out.content
    assert file_fake.requests == []


@pytest.mark.asyncio
async def test_user_cancel_stops_and_cleans_up(paper_services: ServiceContainer, file_fake: FakeServer) -> None:
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(body=make_pdf() + b"%" * 600_000, delay=0.02, chunk_size=8192)
    recorder = Recorder()
    ctx = make_ctx(paper_services, recorder)

    async def cancel_after_bytes(event: Any) -> None:
        if event.type == "tool_progress" and (event.progress.get("done") or 0) > 0:
            ctx.cancelled.set()

    recorder.on_event = cancel_after_bytes
    executor = make_executor(paper_services, [DownloadPaperTool()], mode="auto")
    [result] = await asyncio.wait_for(
        executor.execute([call("download_paper", json.dumps({"paper_id": "2301.01234"}))], ctx), timeout=20
    )
    assert result.output.is_error and "cancelled" in result.output.content
    files = [p for p in paper_services.config.papers_dir.rglob("*") if p.is_file()]
    assert files == []
    assert list(paper_services.downloads.partial_dir.iterdir()) == []
    assert (await paper_services.library.get("2301.01234")).state == "metadata"


@pytest.mark.asyncio
async def test_bad_identifier(paper_services: ServiceContainer) -> None:
    out = await run(paper_services, paper_id="the LSST paper")
    assert out.is_error and "not a paper identifier" in out.content


@pytest.mark.parametrize("allowed", [{"download_allowed_hosts": ["127.0.0.1"]}, {"download_allowed_hosts": ["127.0.0.1", "localhost"]}])
@pytest.mark.asyncio
async def test_redirect_to_a_malformed_url_is_a_clean_error(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer,
                                                            file_fake: FakeServer, allowed: dict[str, Any]) -> None:
    """``http://127.0.0.1:PORT:80/x`` made the guard raise ValueError (a traceback, not a result)."""
    bad = f"http://127.0.0.1:{file_fake.port}:80/x"
    file_fake.state["routes"]["/pdf/2301.01234"] = Route(status=302, location=bad)
    config = make_paper_config(astro_home, ads_fake, arxiv_fake, file_fake, **allowed)
    async with started(config) as services:
        out = await run(services, paper_id="2301.01234")
    assert out.is_error and "exception" not in out.metadata, out.content
    arxiv = [a for a in out.metadata["attempts"] if a["channel"] == "arxiv"][0]
    assert "not a valid URL" in arxiv["error"] and bad in arxiv["error"], arxiv
    assert "ValueError" not in out.content and "Traceback" not in out.content
