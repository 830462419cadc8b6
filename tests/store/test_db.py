"""The store: driver selection, migrations, FTS triggers, error mapping."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from astro_jupyter.errors import SessionNotFound, StoreError, StoreReadOnlyError
from astro_jupyter.store.db import Database, select_driver
from astro_jupyter.store.migrations import apply_migrations, load_migrations


def test_driver_can_load_sqlite_vec_and_fts5() -> None:
    _, info = select_driver()
    assert info.fts5
    assert info.vec_available, f"vector search must not silently vanish: {info.vec_error}"


@pytest.mark.asyncio
async def test_migrations_are_idempotent(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "a.db")
    try:
        assert await apply_migrations(db) == []
        versions = [r["version"] for r in await db.fetchall("SELECT version FROM schema_version ORDER BY version")]
        assert versions == [m.version for m in load_migrations()]
        mode = await db.fetchval("PRAGMA journal_mode")
        assert mode == "wal"
    finally:
        await db.close()


@pytest.mark.asyncio
async def test_fts_follows_inserts_updates_and_deletes(services) -> None:
    session = await services.sessions.create(title="Milky Way halo mass")
    await services.messages.append(session.id, {"role": "user", "content": "satellite kinematics beyond 100 kpc"})
    hits = await services.db.fetchall(
        "SELECT rowid FROM agent_messages_fts WHERE agent_messages_fts MATCH ?", ("kinematics",)
    )
    assert len(hits) == 1
    await services.sessions.update(session.id, title="Andromeda")
    assert not await services.db.fetchall("SELECT * FROM agent_sessions_fts WHERE agent_sessions_fts MATCH 'milky'")
    assert await services.db.fetchall("SELECT * FROM agent_sessions_fts WHERE agent_sessions_fts MATCH 'andromeda'")
    await services.sessions.delete(session.id)
    assert not await services.db.fetchall("SELECT * FROM agent_messages_fts WHERE agent_messages_fts MATCH 'kinematics'")
    with pytest.raises(SessionNotFound):
        await services.sessions.get(session.id)


@pytest.mark.asyncio
async def test_driver_errors_become_store_errors(services) -> None:
    with pytest.raises(StoreError):
        await services.db.execute("SELECT * FROM no_such_table")


@pytest.mark.asyncio
async def test_read_only_database_gives_clear_error_and_still_reads(tmp_path: Path) -> None:
    """SQLite's own read-only mode (``mode=ro``): unlike file modes, root cannot write through it."""
    db = await Database.open(tmp_path / "ro.db")
    await db.execute("INSERT INTO agent_sessions (id) VALUES ('kept')")
    await db.close()
    db = await Database.open(tmp_path / "ro.db", read_only=True)
    try:
        with pytest.raises(StoreReadOnlyError, match="the database cannot be written"):
            await db.execute("INSERT INTO agent_sessions (id) VALUES ('x')")
        with pytest.raises(StoreReadOnlyError):
            await db.write_many("INSERT INTO agent_sessions (id) VALUES (?)", [("y",), ("z",)])
        assert [r["id"] for r in await db.fetchall("SELECT id FROM agent_sessions")] == ["kept"]
    finally:
        await db.close()


@pytest.mark.asyncio
@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions (the mode=ro test above covers root)")
async def test_read_only_file_gives_clear_error(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "ro.db")
    await db.close()
    (tmp_path / "ro.db").chmod(stat.S_IRUSR)
    db = await Database.open(tmp_path / "ro.db", migrate=False)
    try:
        with pytest.raises(StoreError):
            await db.execute("INSERT INTO agent_sessions (id) VALUES ('x')")
    finally:
        await db.close()


@pytest.mark.asyncio
async def test_one_hop_calls_return_what_the_cursor_api_did(services) -> None:
    db = services.db
    rowid = await db.execute("INSERT INTO agent_sessions (id, title) VALUES ('s1', 'first')")
    assert rowid > 0
    await db.execute("INSERT INTO agent_sessions (id, title) VALUES ('s2', 'second')")
    assert await db.fetchone("SELECT id, title FROM agent_sessions WHERE id = ?", ("s1",)) == {"id": "s1", "title": "first"}
    assert await db.fetchone("SELECT id FROM agent_sessions WHERE id = 'none'") is None
    assert await db.fetchval("SELECT count(*) FROM agent_sessions") == 2
    assert await db.fetchval("SELECT id FROM agent_sessions WHERE id = 'none'") is None
    assert await db.fetchall("SELECT id AS sid FROM agent_sessions ORDER BY id") == [{"sid": "s1"}, {"sid": "s2"}]
    assert await db.fetchall("SELECT id FROM agent_sessions WHERE id = 'none'") == []
    assert await db.execute_rowcount("UPDATE agent_sessions SET title = 't' WHERE id IN ('s1', 's2')") == 2
    assert await db.fetchval("SELECT count(*) FROM agent_sessions WHERE id = :a OR id = :b", {"a": "s1", "b": "x"}) == 1


@pytest.mark.asyncio
async def test_write_many_is_all_or_nothing(services) -> None:
    db = services.db
    await db.write_many("INSERT INTO agent_sessions (id) VALUES (?)", [("a",), ("b",)])
    with pytest.raises(StoreError, match="UNIQUE"):
        await db.write_many("INSERT INTO agent_sessions (id) VALUES (?)", [("c",), ("a",)])  # 'a' exists
    assert [r["id"] for r in await db.fetchall("SELECT id FROM agent_sessions ORDER BY id")] == ["a", "b"]
    await db.write_many("INSERT INTO agent_sessions (id) VALUES (?)", [])
    async with db.transaction():  # no transaction was left open by the failure
        await db.execute("INSERT INTO agent_sessions (id) VALUES ('d')")
    assert await db.fetchval("SELECT count(*) FROM agent_sessions") == 3


@pytest.mark.asyncio
async def test_append_many_stores_a_turn_together_or_not_at_all(services) -> None:
    session = await services.sessions.create()
    turn = [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
        {"role": "tool", "content": "result", "tool_call_id": "c1", "name": "x"},
    ]
    await services.messages.append_many(session.id, turn, run_id="r1")
    stored = await services.messages.chat_history(session.id)
    assert stored == turn
    broken = [{"role": "assistant", "content": "half"}, {"content": "no role"}]
    with pytest.raises(KeyError):
        await services.messages.append_many(session.id, broken)
    await services.db.execute("CREATE TRIGGER no_tools BEFORE INSERT ON agent_messages WHEN NEW.role = 'tool' BEGIN SELECT RAISE(ABORT, 'refused'); END")
    with pytest.raises(StoreError, match="refused"):
        await services.messages.append_many(session.id, [{"role": "assistant", "content": "lonely"}, turn[1]])
    assert await services.messages.chat_history(session.id) == turn  # neither half of the failed turn


@pytest.mark.asyncio
async def test_list_running_runs(services) -> None:
    session = await services.sessions.create()
    await services.runs.create("run_a", session.id)
    await services.runs.create("run_b", session.id)
    assert sorted(await services.runs.list_running()) == ["run_a", "run_b"]
    await services.runs.finish("run_a", "finished")
    assert await services.runs.list_running() == ["run_b"]


@pytest.mark.asyncio
async def test_locked_by_another_process_is_a_store_locked_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    from astro_jupyter.errors import StoreLockedError

    db = await Database.open(tmp_path / "l.db", busy_timeout_ms=100)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1], isolation_level=None);"
         " c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.readline()", str(tmp_path / "l.db")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreLockedError, match="locked by another process"):
            await db.execute("INSERT INTO agent_sessions (id) VALUES ('x')")
        with pytest.raises(StoreLockedError):
            await services_write_many(db)
        assert await db.fetchval("SELECT count(*) FROM agent_sessions") == 0  # WAL readers are not blocked
    finally:
        holder.communicate("go\n", timeout=10)
    await db.execute("INSERT INTO agent_sessions (id) VALUES ('x')")  # works once the lock is gone
    await db.close()


async def services_write_many(db: Database) -> None:
    await db.write_many("INSERT INTO agent_sessions (id) VALUES (?)", [("y",)])


@pytest.mark.asyncio
async def test_transaction_rolls_back_on_error(services) -> None:
    session = await services.sessions.create()
    with pytest.raises(RuntimeError):
        async with services.db.transaction():
            await services.messages.append(session.id, {"role": "user", "content": "lost"})
            raise RuntimeError("boom")
    assert await services.messages.list(session.id) == []


@pytest.mark.asyncio
async def test_has_compacted_follows_mark_compacted(services) -> None:
    session = await services.sessions.create()
    other = await services.sessions.create()
    ids = [await services.messages.append(session.id, {"role": "user", "content": f"m{i}"}) for i in range(3)]
    await services.messages.append(other.id, {"role": "user", "content": "x"})
    assert await services.messages.has_compacted(session.id) is False
    assert await services.messages.mark_compacted(session.id, ids[1]) == 2
    assert await services.messages.has_compacted(session.id) is True
    assert await services.messages.has_compacted(other.id) is False
    assert [m["content"] for m in await services.messages.chat_history(session.id)] == ["m2"]


@pytest.mark.asyncio
async def test_a_prompts_context_note_is_stored_apart_and_given_back_to_the_model(services) -> None:
    session = await services.sessions.create(title="notebook")
    note = "\n\n[The user has the notebook lc.ipynb open in JupyterLab.]"
    await services.messages.append(session.id, {"role": "user", "content": "plot the light curve"}, metadata={"context": note})
    [stored] = await services.messages.list(session.id)
    assert stored.content == "plot the light curve"  # what the user typed: their bubble, search, export
    assert await services.messages.chat_history(session.id) == [{"role": "user", "content": "plot the light curve" + note}]
