"""Real PostgreSQL servers for the shared-library tests (tests/fakes/postgres.py), one per session each:
Debian's build (no pgvector: vectors as float32 bytes) and the ``pgserver`` wheel's (pgvector).
``library_backend`` parametrises a test over SQLite and both; every test gets a fresh database."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator

import pytest
import pytest_asyncio

from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer
from tests.fakes import postgres

BACKENDS = ["sqlite", "postgres", "pgvector"]
_names = itertools.count(1)


def _server(bindir: Path | None, what: str) -> Iterator[postgres.PostgresServer]:
    if bindir is None:
        pytest.skip(f"{what} is not installed")
    server = postgres.start(bindir)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[postgres.PostgresServer]:
    """Debian's PostgreSQL (apt-get install postgresql): no pgvector."""
    yield from _server(postgres.debian_bindir(), "Debian's postgresql (apt-get install postgresql)")


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[postgres.PostgresServer]:
    """A pgserver wheel's PostgreSQL, which has pgvector (pip install pgserver==0.1.4)."""
    for server in _server(postgres.pgserver_bindir(), "pgserver (pip install pgserver==0.1.4)"):
        broken = server.vector_probe()
        if broken:
            pytest.skip(broken)
        yield server


@pytest.fixture
def make_database(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``make_database(kind)`` → a URL of a new, empty database on that server ("postgres" | "pgvector")."""

    def make(kind: str) -> str:
        server = request.getfixturevalue("pg_server" if kind == "postgres" else "pgvector_server")
        return server.create_database(f"astro_{next(_names)}")

    return make


@pytest.fixture(params=BACKENDS)
def library_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def library_url(library_backend: str, make_database: Callable[[str], str]) -> str:
    return "" if library_backend == "sqlite" else make_database(library_backend)


@pytest_asyncio.fixture
async def make_container(tmp_path: Path) -> AsyncIterator[Any]:
    """``await make_container(url, user=...)``: a started container of one (simulated) user, with a home of
    its own; closed at the end of the test."""
    made: list[ServiceContainer] = []

    async def make(url: str, *, user: str = "alice", shared_dir: Path | None = None) -> ServiceContainer:
        home = tmp_path / f"home-{user}-{len(made)}"
        config = AstroConfig(home=str(home), project_root=str(tmp_path),
                             shared_library_url=url,
                             shared_library_dir=str(shared_dir or tmp_path / "shared-papers") if url else "")
        container = ServiceContainer(config)
        await container.start()
        if url:
            container.paper_store.user = user
        made.append(container)
        return container

    try:
        yield make
    finally:
        for container in made:
            await container.close()


@pytest_asyncio.fixture
async def library(library_url: str, make_container: Any) -> AsyncIterator[ServiceContainer]:
    yield await make_container(library_url)
