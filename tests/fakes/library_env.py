"""Pytest fixtures wiring the paper-library services to the loopback ADS, arXiv and file fakes.

Registered as a pytest plugin in ``tests/conftest.py``: every test module can use these fixtures.
``paper_config`` points every base URL at a fake, sets a token, disables the arXiv interval
and *enables* private downloads (the fakes are on 127.0.0.1); tests of the guard turn it off.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer, Tuning

from .ads_server import TOKEN, ads_server
from .arxiv_server import arxiv_server
from .base import FakeServer
from .file_server import file_server


@pytest.fixture
def ads_fake() -> Iterator[FakeServer]:
    with ads_server() as fake:
        yield fake


@pytest.fixture
def arxiv_fake() -> Iterator[FakeServer]:
    with arxiv_server() as fake:
        yield fake


@pytest.fixture
def file_fake() -> Iterator[FakeServer]:
    with file_server() as fake:
        fake.state["routes"] = {}
        yield fake


def make_paper_config(
    home: Path, ads: FakeServer, arxiv: FakeServer, files: FakeServer | None = None, **overrides: object
) -> AstroConfig:
    urls = {"ads": ads.url, "arxiv": f"{arxiv.url}/api/query"}
    if files is not None:
        urls.update(arxiv_pdf=f"{files.url}/pdf", doi=f"{files.url}/doi")
    settings: dict[str, object] = {
        "home": str(home),
        "project_root": str(home.parent),
        "service_urls": urls,
        "ads_token": TOKEN,
        "download_allowed_hosts": ["127.0.0.1"],  # the fakes listen on loopback
    }
    settings.update(overrides)
    return AstroConfig(**settings)


@pytest.fixture
def paper_config(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer, file_fake: FakeServer) -> AstroConfig:
    return make_paper_config(astro_home, ads_fake, arxiv_fake, file_fake)


@contextlib.asynccontextmanager
async def started(config: AstroConfig, tuning: Tuning | None = None) -> AsyncIterator[ServiceContainer]:
    """A started ServiceContainer for ``config`` (and internal ``tuning``), closed when the block ends."""
    container = await ServiceContainer(config, tuning=tuning).start()
    try:
        yield container
    finally:
        await container.close()


@pytest_asyncio.fixture
async def paper_services(paper_config: AstroConfig) -> AsyncIterator[ServiceContainer]:
    async with started(paper_config) as container:
        yield container
