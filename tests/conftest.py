"""Shared fixtures: a private ASTRO_HOME per test, an opened ServiceContainer.

The environment is scrubbed of LLM/service settings so no test can reach a real
provider by accident; tests that need one point the config at a loopback fake.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer

pytest_plugins = ["pytest_jupyter.jupyter_server", "tests.fakes.library_env"]  # the paper-service fakes

# ../shared/data/pdfs beside the project; found from a git worktree nested deeper as well
SHARED_PDFS = next(
    (p / "shared" / "data" / "pdfs" for p in Path(__file__).resolve().parents[1:] if (p / "shared" / "data" / "pdfs").is_dir()),
    Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pdfs",
)

_SCRUBBED = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "LLM_MODEL",
    "LLM_FALLBACK_MODEL",
    "LLM_FALLBACK_CHAIN",
    "ADS_API_TOKEN",
    "ASTRO_ADS_URL",
    "ASTRO_ARXIV_URL",
    "ASTRO_SESAME_URL",
    "ASTRO_HOME",
    "ASTRO_EMBED_MODEL",
)


def pytest_configure(config: pytest.Config) -> None:
    """Install what skips would otherwise need (tests/assets.py), before collection evaluates the skipifs.
    Once per run: not in xdist workers, not for ``--collect-only``."""
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    from tests.assets import ensure_all

    for asset in ensure_all():
        print(f"test setup: {asset.note}", file=sys.stderr, flush=True)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in _SCRUBBED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ASTRO_HOME", str(tmp_path / "astro_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the fast deterministic backend unless a test chooses another (the local model costs
    # ~0.1 s a chunk on a busy CI core); tests of the automatic choice delete this
    monkeypatch.setenv("ASTRO_EMBED_MODEL", "lexical")


@pytest.fixture
def astro_tuning() -> Any:
    """Internal tuning the server extension is handed (no setting): quick LLM retries, short HTTP waits."""
    from tests.agent.runtime_helpers import FAST

    return FAST


@pytest.fixture
def sse_pacing() -> Any:
    """How the extension's SSE streams pace their writes; a module overrides it for quick keep-alives."""
    from astro_jupyter.server.sse import SsePacing

    return SsePacing()


@pytest.fixture
def astro_home(tmp_path: Path) -> Path:
    return tmp_path / "astro_home"


@pytest.fixture
def astro_config(astro_home: Path, tmp_path: Path) -> AstroConfig:
    return AstroConfig(home=str(astro_home), project_root=str(tmp_path))


@pytest_asyncio.fixture
async def services(astro_config: AstroConfig) -> AsyncIterator[ServiceContainer]:
    container = ServiceContainer(astro_config)
    await container.start()
    try:
        yield container
    finally:
        await container.close()


@pytest.fixture
def shared_pdfs() -> Path:
    if not SHARED_PDFS.is_dir():
        pytest.skip(f"shared test PDFs not found at {SHARED_PDFS} (packaged install without ../shared)")
    return SHARED_PDFS


@pytest.fixture
def openai_server():
    """A scripted OpenAI-compatible server on loopback (tests/fakes/openai_server.py)."""
    from tests.fakes.openai_server import FakeOpenAIServer

    server = FakeOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sesame_server():
    """A fake CDS Sesame on loopback (tests/fakes/sesame_server.py); point ``service_urls["sesame"]`` at ``.url``."""
    from tests.fakes.sesame_server import FakeSesameServer

    server = FakeSesameServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def dachs_server():
    """A real GAVO DaCHS TAP server on loopback for the catalog tools (tests/fakes/dachs.py), one per session;
    test modules that use it skip when DaCHS is not installed (``dachs.installed()``)."""
    from tests.fakes.dachs import DachsServer

    server = DachsServer().start()
    try:
        yield server
    finally:
        server.stop()
