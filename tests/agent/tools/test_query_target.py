"""query_target through the real executor path is in the runtime tests; here: the tool itself."""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from astro_jupyter.agent.tools.astro.target import QueryTargetTool, tools
from astro_jupyter.agent.tools.base import ToolContext
from astro_jupyter.agent.tools.file_state import FileStateCache
from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer, Tuning
from tests.fakes.library_env import started


@pytest_asyncio.fixture
async def ctx(tmp_path, sesame_server):
    cfg = AstroConfig(home=str(tmp_path / "home"), service_urls={"sesame": sesame_server.url})
    c = ServiceContainer(cfg, tuning=Tuning(http_timeout_secs=0.5))
    await c.start()

    async def emit(event):
        return None

    yield ToolContext(config=cfg, services=c, session_id="s", cancelled=asyncio.Event(), emit=emit, file_state=FileStateCache())
    await c.close()


def test_declaration():
    tool = tools(AstroConfig())[0]
    assert isinstance(tool, QueryTargetTool) and tool.name == "query_target"
    assert tool.is_readonly and tool.is_concurrency_safe({"name": "M 31"}) and not tool.defer_loading
    assert tool.definition()["function"]["parameters"]["required"] == ["name"]


@pytest.mark.asyncio
async def test_resolves_with_degrees_and_sexagesimal(ctx):
    out = await QueryTargetTool().execute({"name": "M 87"}, ctx)
    assert not out.is_error
    assert "187.705931 deg = 12:30:49.42" in out.content
    assert "+12.391123 deg = +12:23:28.0" in out.content
    assert "Type: BiC" in out.content and "NGC 4486" in out.content and "Virgo A" in out.content
    assert out.metadata["main_id"] == "M 87" and out.metadata["aliases"][0] == "NGC 4486"


@pytest.mark.asyncio
async def test_unknown_name_is_an_error_result(ctx):
    out = await QueryTargetTool().execute({"name": "Planet Nine"}, ctx)
    assert out.is_error and "'Planet Nine' was not found" in out.content
    assert out.metadata["not_found"] is True


@pytest.mark.asyncio
async def test_service_down_is_an_error_result(ctx, sesame_server):
    sesame_server.state["fail_status"] = 500
    out = await QueryTargetTool().execute({"name": "M 31"}, ctx)
    assert out.is_error and "HTTP 500" in out.content


@pytest.mark.asyncio
async def test_empty_name(ctx):
    out = await QueryTargetTool().execute({"name": "  "}, ctx)
    assert out.is_error and "non-empty" in out.content


@pytest.mark.asyncio
async def test_a_3_mb_name_is_a_clean_error_and_never_sent(tmp_path, sesame_server):
    """A 3 MB name raised httpx2's InvalidURL out of the tool; now a bounded length, said plainly, no request."""
    from tests.agent.executor_support import Recorder, call, make_ctx, make_executor
    import json

    cfg = AstroConfig(home=str(tmp_path / "home"), service_urls={"sesame": sesame_server.url})
    async with started(cfg, Tuning(http_timeout_secs=0.5)) as services:
        executor = make_executor(services, [QueryTargetTool()], mode="auto")
        before = len(sesame_server.requests)
        [result] = await executor.execute([call("query_target", json.dumps({"name": "M" * 3_000_000}))],
                                          make_ctx(services, Recorder()))
    out = result.output
    assert out.is_error and "exception" not in out.metadata, out.content[:300]
    assert "3,000,000 characters" in out.content and "at most 256" in out.content
    assert len(out.content) < 1000 and "InvalidURL" not in out.content
    assert len(sesame_server.requests) == before
