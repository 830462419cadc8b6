"""The shared library's PostgreSQL connection: a lazily opened ``asyncpg`` pool, versioned migrations,
and whether ``pgvector`` is there.

Only papers, chunks, the full-text index and embeddings live here (``store/pg_library.py``);
everything personal stays in the user's SQLite file. The pool is opened on first use, so a hub
whose database is down still starts every user's server: the first library call raises
``SharedLibraryUnavailable`` with a message saying what failed and that the user's own work goes on,
and the next call tries again.

Migrations (``store/pg_sql/NNNN_name.sql``) are recorded in ``schema_version`` as in SQLite and
applied by one process at a time (an advisory lock). A migration must never block readers of a
live database: every statement runs with a short ``lock_timeout`` and is retried when it cannot get
its lock at once, so a DDL statement never sits in the lock queue (where it would hold up every
``SELECT`` behind it); new columns take constant defaults (no table rewrite), and indexes on existing
tables are built ``CONCURRENTLY`` (a file whose first line is ``-- no transaction`` runs statement by
statement, outside a transaction).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, AsyncIterator
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError, StoreError

CONNECT_SECS = 10.0  # a database that does not answer within this is "unreachable"
POOL_MAX = 8  # connections per user process (a hub of 30 users: at most 240)
LOCK_TIMEOUT_MS = 200  # what one DDL attempt may make readers wait, at most
LOCK_RETRIES = 150  # attempts per statement (≈ 30 s of a reader holding a table, then give up)
MIGRATION_LOCK = 0x617374726F  # pg_advisory_lock key: one migrating process at a time ("astro")
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class SharedLibraryUnavailable(StoreError):
    """The shared PostgreSQL library cannot be reached (or refused us); the user's SQLite store still works."""


@dataclass(frozen=True)
class VectorSupport:
    """``pgvector`` if ``CREATE EXTENSION vector`` worked (or it was there), else float32 bytes."""

    version: str | None
    error: str = ""

    @property
    def available(self) -> bool:
        return self.version is not None

    def describe(self) -> str:
        if self.available:
            return f"pgvector {self.version} (exact kNN in memory; HNSW in PostgreSQL for a space too large for memory)"
        return f"float32 vectors (bytea), searched exactly in memory (no pgvector: {self.error})"


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://…"
    if parts.password:
        netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


@dataclass(frozen=True)
class PgMigration:
    version: int
    name: str
    sql: str

    @property
    def transactional(self) -> bool:
        return not self.sql.lstrip().lower().startswith("-- no transaction")


def load_pg_migrations() -> list[PgMigration]:
    found: dict[int, PgMigration] = {}
    for entry in resources.files("astro_jupyter.store").joinpath("pg_sql").iterdir():
        match = _NAME.match(entry.name)
        if match:
            version = int(match.group(1))
            if version in found:
                raise RuntimeError(f"two PostgreSQL migrations numbered {version}")
            found[version] = PgMigration(version, match.group(2), entry.read_text(encoding="utf-8"))
    return [found[v] for v in sorted(found)]


def _statements(sql: str) -> list[str]:
    """Statements of a non-transactional migration (one per ``;`` at a line end; no function bodies there)."""
    out, buf = [], []
    for line in sql.splitlines():
        if not buf and (not line.strip() or line.strip().startswith("--")):
            continue
        buf.append(line)
        if line.rstrip().endswith(";"):
            out.append("\n".join(buf))
            buf = []
    if "".join(buf).strip():
        out.append("\n".join(buf))
    return out


class PgDatabase:
    """The pool and the facts about the server; ``acquire``/``transaction`` map driver errors."""

    def __init__(self, url: str, *, migrations: list[PgMigration] | None = None) -> None:
        self.url = url
        self._migrations = migrations
        self._pool: Any = None
        self._opening = asyncio.Lock()
        self.vector = VectorSupport(None, "not connected yet")

    async def pool(self) -> Any:
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                self._pool = await self._open()
        return self._pool

    def unavailable(self, exc: BaseException) -> SharedLibraryUnavailable:
        detail = str(exc).strip() or type(exc).__name__
        return SharedLibraryUnavailable(
            f"the shared paper library at {redact(self.url)} is unreachable ({type(exc).__name__}: {detail[:300]}). "
            "Your own sessions, notes and memories are not affected; library and rag_search need the shared "
            "database (ask the hub's administrator, or unset ASTRO_SHARED_LIBRARY_URL to use a library of your own)."
        )

    async def _open(self) -> Any:
        try:
            import asyncpg
        except ImportError as exc:
            raise ConfigError(
                "shared_library_url is set but asyncpg is not installed: pip install 'astro-jupyter[shared-library]'"
            ) from exc
        vector_ok = False

        async def init(conn: Any) -> None:
            if vector_ok:
                from pgvector.asyncpg import register_vector

                await register_vector(conn)

        try:
            async with asyncio.timeout(CONNECT_SECS * 2):
                conn = await asyncpg.connect(self.url, timeout=CONNECT_SECS)
                try:
                    self.vector = await self._ensure_vector(conn)
                    await self._migrate(conn)
                finally:
                    await conn.close()
                vector_ok = self.vector.available
                return await asyncpg.create_pool(
                    self.url, min_size=1, max_size=POOL_MAX, timeout=CONNECT_SECS, init=init
                )
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise self.unavailable(exc) from exc

    @staticmethod
    async def _ensure_vector(conn: Any) -> VectorSupport:
        if importlib.util.find_spec("pgvector") is None:  # the codec the pool registers
            return VectorSupport(None, "the pgvector Python package is not installed")
        try:
            async with conn.transaction():
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception as exc:  # noqa: BLE001 - not installed on the server, or not allowed: arrays then
            version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            if version is None:
                return VectorSupport(None, f"CREATE EXTENSION vector failed: {str(exc).splitlines()[0][:200]}")
            return VectorSupport(str(version))
        return VectorSupport(str(await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")))

    async def _migrate(self, conn: Any) -> list[int]:
        migrations = self._migrations if self._migrations is not None else load_pg_migrations()
        await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
        try:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            applied = {r["version"] for r in await conn.fetch("SELECT version FROM schema_version")}
            done = []
            for migration in migrations:
                if migration.version in applied:
                    continue
                if migration.transactional:
                    await _retry_locked(conn, migration.sql, record=migration)
                else:
                    for statement in _statements(migration.sql):
                        await _retry_locked(conn, statement)
                    await conn.execute(
                        "INSERT INTO schema_version (version, name) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                        migration.version, migration.name,
                    )
                done.append(migration.version)
            return done
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK)

    async def migrate(self) -> list[int]:
        """Apply what is missing now (a new version's migrations on a live database)."""
        pool = await self.pool()
        async with pool.acquire() as conn:
            return await self._migrate(conn)

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        pool = await self.pool()
        import asyncpg

        try:
            async with pool.acquire(timeout=CONNECT_SECS) as conn:
                yield conn
        except (OSError, TimeoutError, asyncpg.exceptions.ConnectionDoesNotExistError,
                asyncpg.exceptions.CannotConnectNowError, asyncpg.exceptions.InterfaceError) as exc:
            raise self.unavailable(exc) from exc
        except asyncpg.PostgresError as exc:
            raise StoreError(f"the shared library refused: {exc}") from exc

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        async with self.acquire() as conn:
            async with conn.transaction():
                yield conn

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        async with self.acquire() as conn:
            return list(await conn.fetch(sql, *args))

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        async with self.acquire() as conn:
            return await conn.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        async with self.acquire() as conn:
            return await conn.fetchval(sql, *args)

    async def execute(self, sql: str, *args: Any) -> str:
        async with self.acquire() as conn:
            return str(await conn.execute(sql, *args))

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pool.close(), 10)

    async def describe(self) -> dict[str, Any]:
        """What ``doctor`` prints: server version, schema version, vector support."""
        async with self.acquire() as conn:
            return {
                "url": redact(self.url),
                "server": str(await conn.fetchval("SHOW server_version")),
                "schema_version": int(await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_version")),
                "vectors": self.vector.describe(),
                "pgvector": self.vector.available,
            }


async def _retry_locked(conn: Any, sql: str, *, record: PgMigration | None = None) -> None:
    """Run DDL that gives up its lock request after ``LOCK_TIMEOUT_MS`` and tries again, so readers
    queue behind it for at most that long per attempt."""
    import asyncpg

    for attempt in range(LOCK_RETRIES):
        try:
            if record is None:  # CONCURRENTLY cannot run inside a transaction block
                await conn.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
                try:
                    await conn.execute(sql)
                finally:
                    await conn.execute("RESET lock_timeout")
                return
            async with conn.transaction():
                await conn.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_version (version, name) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    record.version, record.name,
                )
            return
        except asyncpg.exceptions.LockNotAvailableError:
            await asyncio.sleep(min(0.05 * (attempt + 1), 0.5))  # back off: a reader holds the table
    raise StoreError(f"a shared-library migration could not get its lock in {LOCK_RETRIES} attempts: {sql[:120]}")
