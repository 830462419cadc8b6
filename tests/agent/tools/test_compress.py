"""compress_context: sets the run's manual-compaction flag (idempotent); the compaction itself is
tested through the runtime in tests/agent/test_compaction.py."""

from __future__ import annotations

import pytest

from astro_jupyter.agent.run import RunState
from astro_jupyter.agent.tools.compress import CompressContextTool
from tests.agent.tools.orch_ctx import make_ctx


@pytest.mark.asyncio
async def test_sets_the_flag_once_and_keeps_the_focus(services) -> None:
    state = RunState(run_id="r", session_id="s")
    ctx, _ = make_ctx(services, state=state)
    tool = CompressContextTool()
    first = await tool.execute({"focus": "the H0 values"}, ctx)
    assert not first.is_error and state.compact_requested and state.compact_focus == "the H0 values"
    second = await tool.execute({}, ctx)
    assert "already scheduled" in second.content and state.compact_requested


@pytest.mark.asyncio
async def test_without_a_loop_it_is_a_clear_error(services) -> None:
    ctx, _ = make_ctx(services)
    ctx.scope = None
    out = await CompressContextTool().execute({}, ctx)
    assert out.is_error and "needs a running agent loop" in out.content
