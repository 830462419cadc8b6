"""search_history: FTS5 over sessions/messages, current-session filter, highlighted snippets, deferred."""

from __future__ import annotations

import pytest

from astro_jupyter.agent.tools.search_history import SearchHistoryTool
from tests.agent.tools.orch_ctx import make_ctx


@pytest.mark.asyncio
async def test_finds_earlier_work_with_highlights_and_filters_by_session(services) -> None:
    old = await services.sessions.create(title="Cepheid distances")
    cur = await services.sessions.create(title="today")
    await services.messages.append(old.id, {"role": "assistant", "content": "The Cepheid period-luminosity fit gave 24.4 mag."})
    await services.messages.append(cur.id, {"role": "user", "content": "recheck the cepheid zero point"})
    await services.messages.append(cur.id, {"role": "user", "content": "did we study cepheids?"}, run_id="run_now")
    ctx, _ = make_ctx(services, session_id=cur.id, run_id="run_now")
    tool = SearchHistoryTool()
    out = await tool.execute({"query": "cepheid"}, ctx)
    assert not out.is_error
    assert "«Cepheid»" in out.content and "«cepheid»" in out.content
    assert {h["session_id"] for h in out.metadata["hits"]} == {old.id, cur.id}
    assert "did we study" not in out.content  # the running question is not history
    mine = await tool.execute({"query": "cepheid", "current_session_only": True}, ctx)
    assert {h["session_id"] for h in mine.metadata["hits"]} == {cur.id}
    none = await tool.execute({"query": "pulsar"}, ctx)
    assert not none.is_error and "No matches" in none.content
    assert (await tool.execute({"query": "  "}, ctx)).is_error


def test_is_deferred_and_concurrency_safe() -> None:
    tool = SearchHistoryTool()
    assert tool.defer_loading and tool.is_concurrency_safe({}) and not tool.is_readonly
