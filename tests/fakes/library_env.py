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
from astro_jupyter.services.container import ServiceContainer

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
    settings: dict[str, object] = {
        "home": str(home),
        "project_root": str(home.parent),
        "ads_url": ads.url,
        "ads_token": TOKEN,
        "arxiv_url": f"{arxiv.url}/api/query",
        "arxiv_min_interval_secs": 0.0,
        "http_timeout_secs": 5.0,
        "allow_private_downloads": True,
    }
    if files is not None:
        settings["arxiv_pdf_url"] = f"{files.url}/pdf"
        settings["doi_resolver_url"] = f"{files.url}/doi"
    settings.update(overrides)
    return AstroConfig(**settings)


@pytest.fixture
def paper_config(astro_home: Path, ads_fake: FakeServer, arxiv_fake: FakeServer, file_fake: FakeServer) -> AstroConfig:
    return make_paper_config(astro_home, ads_fake, arxiv_fake, file_fake)


@contextlib.asynccontextmanager
async def started(config: AstroConfig) -> AsyncIterator[ServiceContainer]:
    """A started ServiceContainer for ``config``, closed when the block ends."""
    container = await ServiceContainer(config).start()
    try:
        yield container
    finally:
        await container.close()


@pytest_asyncio.fixture
async def paper_services(paper_config: AstroConfig) -> AsyncIterator[ServiceContainer]:
    async with started(paper_config) as container:
        yield container
