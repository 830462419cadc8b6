"""An outside agent's call stored as a session (``run_tool_as_session``, what ``astro-jupyter mcp``
runs per call): the session and the executor's audit row are written together, once, and the audit
row is not lost when the session cannot be stored."""

from __future__ import annotations

import asyncio

import pytest

from astro_jupyter.app import AstroApp
from astro_jupyter.config import AstroConfig
from astro_jupyter.errors import StoreError
from astro_jupyter.mcp.server import PendingStores
from astro_jupyter.store.audit import AuditRepository

ARGS = {"name": "M 31"}


def _config(tmp_path, sesame_server) -> AstroConfig:
    return AstroConfig(home=str(tmp_path / "home"), service_urls={"sesame": sesame_server.url})


@pytest.mark.asyncio
async def test_a_call_is_in_the_session_list_with_one_audit_row(tmp_path, sesame_server):
    config = _config(tmp_path, sesame_server)
    async with AstroApp(config, source="mcp") as app:
        run, session_id = await app.run_tool_as_session("query_target", ARGS, source="mcp", title_prefix="MCP")
        assert not run.is_error and "00:42:44.33" in run.content
    async with AstroApp(config) as reopened:  # what the sidebar's history sees afterwards
        sessions = {s["id"]: s for s in await reopened.list_sessions(None)}
        audit = await reopened.services.audit.list(session_id)
    assert sessions[session_id]["source"] == "mcp"
    assert sessions[session_id]["title"] == 'MCP query_target: {"name": "M 31"}'
    assert [(row["event"], row["tool_name"], row["tool_call_id"]) for row in audit] == [
        ("tool_use", "query_target", run.call_id)]


@pytest.mark.asyncio
async def test_a_call_whose_session_cannot_be_stored_keeps_its_audit_row(tmp_path, sesame_server):
    config = _config(tmp_path, sesame_server)
    async with AstroApp(config, source="mcp") as app:
        await app.services.db.execute(  # a store that refuses new sessions (as a full or damaged one would)
            "CREATE TRIGGER refuse_sessions BEFORE INSERT ON agent_sessions BEGIN SELECT RAISE(ABORT, 'refused'); END")
        with pytest.raises(StoreError):
            await app.run_tool_as_session("query_target", ARGS, source="mcp", title_prefix="MCP")
        assert await app.list_sessions(None) == []
        rows = await app.services.audit.list()
    assert [(row["event"], row["tool_name"]) for row in rows] == [("tool_use", "query_target")]


@pytest.mark.asyncio
async def test_held_audit_rows_wait_for_the_caller_and_late_ones_are_written(tmp_path):
    config = AstroConfig(home=str(tmp_path / "home"))
    async with AstroApp(config) as app:
        repo: AuditRepository = app.services.audit
        release = asyncio.Event()

        async def late() -> None:  # started inside the block, records after it closed
            await release.wait()
            await repo.record("notification", session_id="s1")

        with repo.held() as held:
            await repo.record("tool_use", session_id="s1", tool_name="query_target")
            task = asyncio.create_task(late())
        assert [row[2] for row in held.rows] == ["tool_use"]
        assert await repo.list("s1") == []  # kept back for the caller's transaction
        release.set()
        await task
        assert [row["event"] for row in await repo.list("s1")] == ["notification"]


@pytest.mark.asyncio
async def test_pending_stores_drain_waits_for_every_store_and_logs_a_failed_one(caplog):
    pending, stored, gate = PendingStores(), [], asyncio.Event()

    async def store(i: int) -> None:
        await gate.wait()
        stored.append(i)

    async def refused() -> None:
        await gate.wait()
        raise StoreError("database is locked")

    for coro in (store(1), refused(), store(2)):
        pending.add(coro)
    drain = asyncio.create_task(pending.drain())
    await asyncio.sleep(0)
    assert not drain.done() and len(pending) == 3
    gate.set()
    await drain
    assert sorted(stored) == [1, 2] and len(pending) == 0
    assert "could not be stored as a session: database is locked" in caplog.text
