"""One SQLite file, opened with a driver that can load sqlite-vec, each connection on a thread of its own.

Why the driver dance: some Python builds (this project's CI among them) ship a stdlib
``sqlite3`` without ``enable_load_extension``, so vector search would silently vanish.
``select_driver`` prefers the stdlib when it can load extensions and otherwise falls back
to ``pysqlite3`` or ``sqlean``; only when none can does the store open without vec0, and
``DriverInfo.vec_error`` says why (``astro-jupyter doctor`` prints it).

Driver exceptions are not ``sqlite3.Error`` subclasses when a fallback driver is used,
so every call goes through ``_mapped`` which turns them into ``StoreError`` kinds.

Each connection lives on one thread (a single-worker executor: ``_Connection``) and every call is
one hop there, statement, fetch and cursor close together. aiosqlite does the same, but the only
way to run a function on its thread is private (``Connection._execute``).

Two connections (each with its own thread): writes, transactions and everything inside a
transaction use the writer; plain reads (``fetch*`` outside a transaction, ``read_sync``) use
the reader. In WAL mode a reader never waits for a writer, so listing sessions does not queue
behind a batch of event inserts, nor behind a write that waits out another process's lock
(the CLI or a kernel writing the same file) for up to the busy timeout. An in-memory or
read-only database has one connection for both.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import importlib
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, AsyncIterator, Iterable, Sequence
from urllib.parse import quote

from ..errors import StoreError, StoreLockedError, StoreReadOnlyError

BUSY_TIMEOUT_MS = 10_000
_DRIVER_CANDIDATES = ("sqlite3", "pysqlite3.dbapi2", "sqlean.dbapi2")


@dataclass(frozen=True)
class DriverInfo:
    module: str
    sqlite_version: str
    vec_version: str | None
    fts5: bool
    vec_error: str = ""

    @property
    def vec_available(self) -> bool:
        return self.vec_version is not None


def _try_load_vec(driver: ModuleType) -> tuple[str | None, str]:
    conn = driver.connect(":memory:")
    try:
        if not hasattr(conn, "enable_load_extension"):
            return None, f"{driver.__name__} cannot load extensions (built without enable_load_extension)"
        import sqlite_vec

        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        return str(conn.execute("select vec_version()").fetchone()[0]), ""
    except Exception as exc:  # noqa: BLE001 - any failure means "this driver cannot"
        return None, f"{driver.__name__}: {exc}"
    finally:
        conn.close()


def _has_fts5(driver: ModuleType) -> bool:
    conn = driver.connect(":memory:")
    try:
        conn.execute("create virtual table t using fts5(x)")
        return True
    except Exception:  # noqa: BLE001
        return False
    finally:
        conn.close()


_selected: tuple[ModuleType, DriverInfo] | None = None


def select_driver() -> tuple[ModuleType, DriverInfo]:
    """The first driver that loads sqlite-vec, else the first that imports (vec reported missing)."""
    global _selected
    if _selected is not None:
        return _selected
    first: ModuleType | None = None
    errors: list[str] = []
    for name in _DRIVER_CANDIDATES:
        try:
            driver = importlib.import_module(name)
        except ImportError:
            continue
        first = first or driver
        vec_version, error = _try_load_vec(driver)
        if vec_version is not None:
            _selected = driver, DriverInfo(name, driver.sqlite_version, vec_version, _has_fts5(driver))
            return _selected
        errors.append(error)
    assert first is not None  # the stdlib module always imports
    _selected = first, DriverInfo(
        first.__name__, first.sqlite_version, None, _has_fts5(first), "; ".join(errors) or "sqlite-vec not installed"
    )
    return _selected


def map_driver_error(exc: BaseException) -> StoreError:
    text = str(exc)
    lowered = text.lower()
    if "locked" in lowered or "busy" in lowered:
        return StoreLockedError(f"the database is locked by another process: {text}")
    if "readonly" in lowered or "read-only" in lowered or "unable to open" in lowered:
        return StoreReadOnlyError(f"the database cannot be written: {text}")
    return StoreError(text)


def _is_driver_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) or type(exc).__name__ in {
        "OperationalError",
        "IntegrityError",
        "DatabaseError",
        "ProgrammingError",
        "InterfaceError",
        "DataError",
        "NotSupportedError",
        "InternalError",
    }


@contextlib.contextmanager
def _mapped() -> Any:
    try:
        yield
    except StoreError:
        raise
    except BaseException as exc:
        if _is_driver_error(exc):
            raise map_driver_error(exc) from exc
        raise


Row = dict[str, Any]


# -- the functions ``Database._hop`` runs on the connection thread (conn is the raw driver connection)
def _rows(cursor: Any, rows: list[Any]) -> list[Row]:
    if not rows:
        return []
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, tuple(row))) for row in rows]


def _sync_execute(conn: Any, sql: str, params: Any) -> int:
    cursor = conn.execute(sql, params)
    try:
        return int(cursor.lastrowid or 0)
    finally:
        cursor.close()


def _sync_rowcount(conn: Any, sql: str, params: Any) -> int:
    cursor = conn.execute(sql, params)
    try:
        return int(cursor.rowcount)
    finally:
        cursor.close()


def _sync_executemany(conn: Any, sql: str, rows: list[Sequence[Any]]) -> None:
    conn.executemany(sql, rows).close()


def _sync_fetchall(conn: Any, sql: str, params: Any) -> list[Row]:
    cursor = conn.execute(sql, params)
    try:
        return _rows(cursor, cursor.fetchall())
    finally:
        cursor.close()


def _sync_fetchone(conn: Any, sql: str, params: Any) -> Row | None:
    cursor = conn.execute(sql, params)
    try:
        row = cursor.fetchone()
        return None if row is None else _rows(cursor, [row])[0]
    finally:
        cursor.close()


def _sync_fetchval(conn: Any, sql: str, params: Any) -> Any:
    cursor = conn.execute(sql, params)
    try:
        row = cursor.fetchone()
        return None if row is None else tuple(row)[0]
    finally:
        cursor.close()


def _sync_in_transaction(conn: Any, fn: Any, *args: Any) -> Any:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn, *args)
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(Exception):
            conn.execute("ROLLBACK")
        raise
    return result


class _Connection:
    """A driver connection living on a thread of its own; ``run`` is one hop there."""

    def __init__(self, executor: ThreadPoolExecutor, conn: Any) -> None:
        self._executor = executor
        self._conn = conn

    @classmethod
    async def open(cls, connector: Any) -> "_Connection":
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="astro-db")
        try:
            conn = await asyncio.get_running_loop().run_in_executor(executor, connector)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(executor, conn)

    async def run(self, fn: Any, *args: Any) -> Any:
        """``fn(raw_connection, *args)`` on the connection's thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, functools.partial(fn, self._conn, *args))

    async def close(self) -> None:
        try:
            await self.run(_sync_close)
        finally:
            self._executor.shutdown(wait=False)


def _sync_close(conn: Any) -> None:
    conn.close()


def _sync_executescript(conn: Any, script: str) -> None:
    conn.executescript(script)


_IN_TRANSACTION: contextvars.ContextVar[bool] = contextvars.ContextVar("astro_db_in_transaction", default=False)


class Database:
    """An open store. Writes that belong together go through ``transaction()``."""

    def __init__(
        self, conn: _Connection, path: Path, info: DriverInfo, reader: _Connection | None = None
    ) -> None:
        self._conn = conn
        self._reader = reader or conn
        self.path = path
        self.info = info
        self._write_lock = asyncio.Lock()

    @classmethod
    async def open(
        cls, path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS, migrate: bool = True, read_only: bool = False
    ) -> "Database":
        """``read_only``: SQLite's ``mode=ro`` (writes fail with ``StoreReadOnlyError``, even as root)."""
        path = Path(path)
        if str(path) != ":memory:" and not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        driver, info = select_driver()
        target = f"file:{quote(str(path.resolve()))}?mode=ro" if read_only else str(path)

        def connector() -> Any:
            conn = driver.connect(
                target, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False, uri=read_only
            )
            conn.row_factory = driver.Row
            if info.vec_available:
                import sqlite_vec

                conn.enable_load_extension(True)
                sqlite_vec.load(conn)
                conn.enable_load_extension(False)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = NORMAL")
            try:
                conn.execute("PRAGMA journal_mode = WAL")
            except Exception:  # noqa: BLE001 - a read-only file cannot switch modes; reads still work
                pass
            return conn

        with _mapped():
            conn = await _Connection.open(connector)
        db = cls(conn, path, info)
        if migrate and not read_only:
            from .migrations import apply_migrations

            await apply_migrations(db)
        if not read_only and str(path) != ":memory:" and "mode=memory" not in str(path):
            with _mapped():  # opened after the migrations, so it never sees a half-made schema
                db._reader = await _Connection.open(connector)
        return db

    async def close(self) -> None:
        with _mapped():
            if self._reader is not self._conn:
                await self._reader.close()
            await self._conn.close()

    # Every call below is ONE hop to the connection's thread: statement, fetch and cursor
    # close run together there (``_hop``): a cursor API would cost a hop per step (execute,
    # fetch, close), and a turn makes a dozen of these calls.
    async def _hop(self, fn: Any, *args: Any) -> Any:
        with _mapped():
            return await self._conn.run(fn, *args)

    async def _write_hop(self, fn: Any, *args: Any) -> Any:
        """A write outside ``transaction()`` waits for any open transaction of another task to end:
        run on the shared writer meanwhile, it would land inside that transaction (uncommitted,
        invisible to the reader, undone by its rollback)."""
        if _IN_TRANSACTION.get():
            return await self._hop(fn, *args)
        async with self._write_lock:
            return await self._hop(fn, *args)

    async def _read_hop(self, fn: Any, sql: str, *args: Any) -> Any:
        """A read: on the reader connection, unless this task is inside a transaction (it must see
        its own uncommitted writes) or it is a PRAGMA (per-connection state such as data_version)."""
        if _IN_TRANSACTION.get() or self._reader is self._conn or sql.lstrip()[:6].upper() == "PRAGMA":
            return await self._hop(fn, sql, *args)
        with _mapped():
            return await self._reader.run(fn, sql, *args)

    async def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        """Run one statement; returns lastrowid (inserts) so callers need no cursor."""
        return int(await self._write_hop(_sync_execute, sql, params))

    async def execute_rowcount(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        return int(await self._write_hop(_sync_rowcount, sql, params))

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self._write_hop(_sync_executemany, sql, list(rows))

    async def executescript(self, script: str) -> None:
        with _mapped():
            await self._conn.run(_sync_executescript, script)

    async def fetchall(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Row]:
        return await self._read_hop(_sync_fetchall, sql, params)

    async def fetchone(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Row | None:
        return await self._read_hop(_sync_fetchone, sql, params)

    async def fetchval(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        return await self._read_hop(_sync_fetchval, sql, params)

    async def write_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """``executemany`` in its own BEGIN IMMEDIATE ... COMMIT, all in one hop (all or nothing)."""
        rows = list(rows)
        if not rows:
            return
        async with self._write_lock:
            await self._hop(_sync_in_transaction, _sync_executemany, sql, rows)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator["Database"]:
        """BEGIN IMMEDIATE ... COMMIT; rolled back on any error. Serialised within this process."""
        async with self._write_lock:
            token = _IN_TRANSACTION.set(True)
            try:
                await self.execute("BEGIN IMMEDIATE")
                try:
                    yield self
                    await self.execute("COMMIT")
                except BaseException:  # the body or COMMIT failed: never leave the transaction open
                    with contextlib.suppress(Exception):
                        await self.execute("ROLLBACK")
                    raise
            finally:
                _IN_TRANSACTION.reset(token)

    async def transact_sync(self, fn: Any, *args: Any) -> Any:
        """``fn(raw_connection, *args)`` inside BEGIN IMMEDIATE ... COMMIT (rolled back on any error), all
        in one hop: a write of many statements (a paper's chunks) costs one thread handoff, not one each."""
        if _IN_TRANSACTION.get():  # already inside this task's transaction: part of it
            return await self._hop(fn, *args)
        async with self._write_lock:
            return await self._hop(_sync_in_transaction, fn, *args)

    async def run_sync(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(raw_connection, *args)`` on the connection's own thread (bulk vector work)."""
        return await self._write_hop(fn, *args)

    async def read_sync(self, fn: Any, *args: Any) -> Any:
        """``run_sync`` for work that only reads: on the reader connection (see the module docstring)."""
        if _IN_TRANSACTION.get() or self._reader is self._conn:
            return await self._hop(fn, *args)
        with _mapped():
            return await self._reader.run(fn, *args)
