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


@pytest.mark.asyncio
async def test_more_results_through_the_cursor(services) -> None:
    services.history.window = 3  # small windows, so paging crosses from tier to tier
    s = await services.sessions.create(title="lensing work")
    ids = [await services.messages.append(s.id, {"role": "user", "content": f"microlensing event {i}"}) for i in range(8)]
    ctx, _ = make_ctx(services, session_id=s.id, run_id="run_now")
    tool = SearchHistoryTool()
    seen: list[int] = []
    out = await tool.execute({"query": "microlensing", "limit": 3}, ctx)
    assert out.metadata["next_cursor"] and f"cursor {out.metadata['next_cursor']!r}" in out.content
    assert {h["message_id"] for h in out.metadata["hits"]} == set(ids[-3:])  # the newest first
    seen += [h["message_id"] for h in out.metadata["hits"]]
    while out.metadata["next_cursor"]:
        out = await tool.execute({"query": "microlensing", "limit": 3, "cursor": out.metadata["next_cursor"]}, ctx)
        assert not out.is_error and "(continued)" in out.content
        seen += [h["message_id"] for h in out.metadata["hits"]]
    assert sorted(seen) == ids and "More results" not in out.content

    bad = await tool.execute({"query": "microlensing", "cursor": "page-2"}, ctx)
    assert bad.is_error and "not a history-search cursor" in bad.content
    cursor = (await tool.execute({"query": "microlensing", "limit": 3}, ctx)).metadata["next_cursor"]
    other = await tool.execute({"query": "lensing", "cursor": cursor}, ctx)
    assert other.is_error and "different search" in other.content
