"""The store: driver selection, migrations, FTS triggers, error mapping."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from astro_jupyter.errors import SessionNotFound, StoreError
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
@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
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
async def test_transaction_rolls_back_on_error(services) -> None:
    session = await services.sessions.create()
    with pytest.raises(RuntimeError):
        async with services.db.transaction():
            await services.messages.append(session.id, {"role": "user", "content": "lost"})
            raise RuntimeError("boom")
    assert await services.messages.list(session.id) == []
