"""Shared fixtures: a private ASTRO_HOME per test, an opened ServiceContainer.

The environment is scrubbed of LLM/service settings so no test can reach a real
provider by accident; tests that need one point the config at a loopback fake.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

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
    Once per run: not in xdist workers (they take the controller's notes, the skips' reasons), not for
    ``--collect-only``."""
    from tests.assets import NOTES, Asset, ensure_all

    if hasattr(config, "workerinput"):
        NOTES.update((name, Asset(**fields)) for name, fields in config.workerinput.get(_SETUP_NOTES, {}).items())
        return
    if config.option.collectonly:
        return
    for asset in ensure_all():
        print(f"test setup: {asset.note}", file=sys.stderr, flush=True)


_SETUP_NOTES = "astro_test_setup_notes"


@pytest.hookimpl(optionalhook=True)  # an xdist hook, called in the controller as it starts each worker
def pytest_configure_node(node: Any) -> None:
    from tests.assets import NOTES

    node.workerinput[_SETUP_NOTES] = {name: dataclasses.asdict(asset) for name, asset in NOTES.items()}


# The tests that run in one pytest-xdist worker, one after another (``--dist loadgroup`` in pyproject.toml):
# - every test on a GAVO DaCHS server (tests/fakes/dachs.py): all servers share one PostgreSQL database and
#   its UWS job queue (a server may start another's queued job), and ``abort_queries`` ends every running
#   TAP query on the machine, so two workers' DaCHS tests would cancel each other's queries;
# - the UI tests (tests/ui/): they share one ``jupyter lab`` and one Chromium per worker (package fixtures,
#   seconds to start and a core to run), and their lab's TAP service is a DaCHS server too.
# xdist hands out the largest group first, so this one starts at once on one worker while the other
# worker takes the rest of the suite test by test.
ONE_WORKER_GROUP = "dachs_and_ui"


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    ui = Path(__file__).resolve().parent / "ui"
    for item in items:  # before the other plugins' hooks: xdist's (in a worker) reads these marks
        if "dachs_server" in getattr(item, "fixturenames", ()) or item.path.resolve().is_relative_to(ui):
            item.add_marker(pytest.mark.xdist_group(ONE_WORKER_GROUP))
    yield
    if getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        _name_the_groups(items)


def _name_the_groups(items: list[pytest.Item]) -> None:
    """What pytest-xdist's worker does for ``--dist loadgroup``, where it fails to: ``test_id@group``.

    xdist (3.8) tells the scheduler a test's group by appending ``@group`` to the test's id, and it
    writes the id to ``item._nodeid``, which pytest 9.2 no longer reads (ids are ``NodeId`` objects in
    ``item._id``): the groups are silently ignored (pytest-xdist issue 1386). Where xdist did it (older
    pytest, a fixed xdist), this changes nothing; ``pytest_xdist_node_collection_finished`` below checks
    the result, so a change on either side fails the run instead of mixing the groups again."""
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(names)
        if not names or item.nodeid.endswith(suffix):
            continue
        if isinstance(getattr(item, "_id", None), str) or not hasattr(item, "_id"):
            item._nodeid = item.nodeid + suffix  # type: ignore[attr-defined]
        else:
            from _pytest.nodeid import NodeId  # pytest >= 9.2

            item._id = NodeId.parse(item.nodeid + suffix)  # type: ignore[attr-defined]


@pytest.hookimpl(optionalhook=True)  # an xdist hook: pytest without xdist (or -p no:xdist) has no such hook
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """In the controller, per worker: under --dist loadgroup, every UI test's id names its group."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    lost = [i for i in ids if i.startswith("tests/ui/") and not i.endswith("@" + ONE_WORKER_GROUP)]
    if lost:
        raise pytest.UsageError(f"--dist loadgroup: {len(lost)} UI tests are not in the group {ONE_WORKER_GROUP!r} "
                                f"(e.g. {lost[0]}), so two workers would run them at once; see tests/conftest.py")


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
