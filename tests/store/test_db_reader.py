"""Reads do not queue behind writes: the store reads on its own connection.

Why: the server had one SQLite connection (one thread). When another process (a CLI run, a
kernel) held the write lock, the server's next event batch waited there for up to the busy
timeout, and every read queued behind it: ``GET astro/api/sessions`` took seconds.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from astro_jupyter.store.db import Database
from astro_jupyter.store.sessions import SessionRepository


HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("INSERT INTO agent_sessions (id, title, source) VALUES ('ses_cli', 'from the cli', 'cli')")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
print("committed", flush=True)
"""


@pytest.mark.asyncio
async def test_listing_sessions_answers_while_a_write_waits_for_another_process(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "astro.db", busy_timeout_ms=10_000)
    sessions = SessionRepository(db)
    first = await sessions.create(title="before the lock")
    cli = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path / "astro.db")],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert cli.stdout.readline().strip() == "locked"  # another process holds the write lock
        blocked = asyncio.ensure_future(sessions.create(title="waits for the lock"))
        await asyncio.sleep(0.3)
        assert not blocked.done()  # our write is waiting out the other process's lock
        listed = await asyncio.wait_for(sessions.list(), 5.0)  # the write waits up to 10 s; the read does not
        assert [s.id for s in listed] == [first.id]  # committed data only, not the CLI's open transaction
        cli.stdin.write("go\n")
        cli.stdin.flush()
        assert cli.stdout.readline().strip() == "committed"
        created = await asyncio.wait_for(blocked, 10)
        assert {s.id for s in await sessions.list()} == {first.id, "ses_cli", created.id}  # reads see every commit
    finally:
        cli.kill()
        cli.wait()
        await db.close()


@pytest.mark.asyncio
async def test_a_transaction_reads_its_own_writes_and_others_see_them_after_commit(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "astro.db")
    try:
        async with db.transaction():
            await db.execute("INSERT INTO agent_sessions (id, title) VALUES ('ses_tx', 'in flight')")
            assert await db.fetchval("SELECT title FROM agent_sessions WHERE id = 'ses_tx'") == "in flight"
            outside = await asyncio.create_task(_title_outside(db))
            assert outside is None  # another task does not see the uncommitted row
        assert await db.fetchval("SELECT title FROM agent_sessions WHERE id = 'ses_tx'") == "in flight"
    finally:
        await db.close()


async def _title_outside(db: Database) -> object:
    from astro_jupyter.store import db as dbmod

    dbmod._IN_TRANSACTION.set(False)  # a task started elsewhere, outside the transaction
    return await db.fetchval("SELECT title FROM agent_sessions WHERE id = 'ses_tx'")


@pytest.mark.asyncio
async def test_an_in_memory_store_still_works_with_one_connection() -> None:
    db = await Database.open(":memory:")
    try:
        await db.execute("INSERT INTO agent_sessions (id, title) VALUES ('ses_m', 'memory')")
        assert await db.fetchval("SELECT title FROM agent_sessions WHERE id = 'ses_m'") == "memory"
    finally:
        await db.close()


@pytest.mark.asyncio
async def test_a_write_from_another_task_never_lands_inside_an_open_transaction(tmp_path: Path) -> None:
    """It waits for the transaction to end: it is not undone by that transaction's rollback,
    and the reader sees it as soon as the write returns."""
    db = await Database.open(tmp_path / "astro.db")
    sessions = SessionRepository(db)
    opened, release = asyncio.Event(), asyncio.Event()

    async def failing_transaction() -> None:
        async with db.transaction():
            await db.execute("INSERT INTO agent_sessions (id, title) VALUES ('ses_undone', 'rolled back')")
            opened.set()
            await release.wait()
            raise RuntimeError("the transaction fails")

    try:
        tx = asyncio.ensure_future(failing_transaction())
        await opened.wait()
        other = asyncio.ensure_future(sessions.create(title="from another task"))
        await asyncio.sleep(0.1)
        release.set()
        with pytest.raises(RuntimeError):
            await tx
        created = await asyncio.wait_for(other, 5)  # its own read-back found the row
        assert [s.title for s in await sessions.list()] == ["from another task"]
        assert created.title == "from another task"
    finally:
        await db.close()
