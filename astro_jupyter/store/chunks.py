"""Paper chunks (``paper_chunks`` + FTS5) and their embeddings (one vector table per space).

An *embedding space* is a backend plus a dimension (``lexical-v2`` at 384, an endpoint
model at 1536, ...). Each gets its own table ``paper_chunk_vec_<backend>_<dim>``: a sqlite-vec
``vec0`` table (cosine distance) when the driver can load sqlite-vec, else a plain BLOB
table (the in-memory index then does all the searching). The chunk id is the rowid, so a
backend change simply finds chunks with no row in the new space and embeds them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from .db import _sync_execute, _sync_executemany, _sync_fetchall

if TYPE_CHECKING:
    from .db import Database


@dataclass
class ChunkRow:
    id: int
    paper_id: str
    seq: int
    section: str
    part: str
    page_start: int | None
    page_end: int | None
    text: str
    title: str = ""

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "ChunkRow":
        return cls(
            int(row["id"]),
            row["paper_id"],
            int(row["seq"]),
            row["section"],
            row.get("part") or "body",
            row["page_start"],
            row["page_end"],
            row["text"],
            row.get("title") or "",
        )

    @property
    def pages(self) -> str:
        if self.page_start is None:
            return ""
        return f"p. {self.page_start}" if self.page_start == self.page_end else f"pp. {self.page_start}-{self.page_end}"


@dataclass(frozen=True)
class Space:
    name: str  # the table name
    backend: str
    dim: int
    kind: str  # "vec0" | "blob"


def space_name(backend: str, dim: int) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", backend.lower()).strip("_")[:40] or "default"
    return f"paper_chunk_vec_{slug}_{int(dim)}"


_COLUMNS = "c.id, c.paper_id, c.seq, c.section, c.part, c.page_start, c.page_end, c.text"


def _replace_sync(conn: Any, paper_id: str, spaces: list[str], rows: list[tuple[Any, ...]]) -> list[int]:
    """``ChunkRepository.replace`` on the connection's thread, inside its transaction."""
    old = [(r["id"],) for r in _sync_fetchall(conn, "SELECT id FROM paper_chunks WHERE paper_id = ?", (paper_id,))]
    for name in spaces:
        _sync_executemany(conn, f"DELETE FROM {name} WHERE rowid = ?", old)
    _sync_execute(conn, "DELETE FROM paper_chunks WHERE paper_id = ?", (paper_id,))
    insert = "INSERT INTO paper_chunks (paper_id, seq, section, part, page_start, page_end, text) VALUES (?, ?, ?, ?, ?, ?, ?)"
    return [_sync_execute(conn, insert, row) for row in rows]


def _put_vectors_sync(conn: Any, table: str, rows: list[tuple[int, bytes]]) -> None:
    _sync_executemany(conn, f"DELETE FROM {table} WHERE rowid = ?", [(i,) for i, _ in rows])
    _sync_executemany(conn, f"INSERT INTO {table} (rowid, embedding) VALUES (?, ?)", rows)


class ChunkRepository:
    def __init__(self, db: "Database") -> None:
        self.db = db
        self._spaces: dict[str, Space] = {}

    async def data_version(self) -> int:
        return int(await self.db.fetchval("PRAGMA data_version"))

    # -- chunks --------------------------------------------------------------------------
    async def replace(self, paper_id: str, chunks: Sequence[Any]) -> list[int]:
        """Drop a paper's chunks (and their vectors in every space), insert the new ones; returns their ids.
        One transaction in one hop to the connection's thread (a statement per hop made bulk ingest's
        stores cost more than its parses)."""
        spaces = [space.name for space in await self.spaces()]
        rows = [(paper_id, c.seq, c.section, c.part, c.page_start, c.page_end, c.text) for c in chunks]
        return await self.db.transact_sync(_replace_sync, paper_id, spaces, rows)

    async def removed_ids(self, paper_id: str) -> list[int]:
        return [r["id"] for r in await self.db.fetchall("SELECT id FROM paper_chunks WHERE paper_id = ?", (paper_id,))]

    async def for_paper(self, paper_id: str, *, part: str | None = None) -> list[ChunkRow]:
        sql = f"SELECT {_COLUMNS} FROM paper_chunks c WHERE c.paper_id = ?"
        params: list[Any] = [paper_id]
        if part:
            sql += " AND c.part = ?"
            params.append(part)
        return [ChunkRow.from_row(r) for r in await self.db.fetchall(sql + " ORDER BY c.seq", params)]

    async def get_many(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS}, p.title AS title FROM paper_chunks c LEFT JOIN papers p ON p.id = c.paper_id"
            f" WHERE c.id IN ({marks})",
            ids,
        )
        return {int(r["id"]): ChunkRow.from_row(r) for r in rows}

    async def count(self, paper_id: str | None = None) -> int:
        if paper_id is None:
            return int(await self.db.fetchval("SELECT count(*) FROM paper_chunks"))
        return int(await self.db.fetchval("SELECT count(*) FROM paper_chunks WHERE paper_id = ?", (paper_id,)))

    async def searchable_count(self) -> int:
        """Chunks that retrieval can return (front matter and body, not references)."""
        return int(await self.db.fetchval("SELECT count(*) FROM paper_chunks WHERE part != 'references'"))

    async def ids_for_papers(self, paper_ids: Sequence[str]) -> list[int]:
        """Searchable chunk ids of these papers: front matter and body, never the references."""
        marks = ",".join("?" * len(paper_ids))
        rows = await self.db.fetchall(
            f"SELECT id FROM paper_chunks WHERE paper_id IN ({marks}) AND part != 'references'", list(paper_ids)
        )
        return [int(r["id"]) for r in rows]

    async def fts(self, match: str, limit: int, *, paper_ids: Sequence[str] | None = None) -> list[tuple[int, float]]:
        """BM25 ranking (best first) of front-matter and body chunks for a sanitised FTS5 expression.

        The full-text match runs first (a materialised CTE): joined naively, SQLite may walk a
        paper's chunks by index and re-run the MATCH for each one (seconds on a large library).
        """
        sql = (
            "WITH f AS MATERIALIZED (SELECT rowid AS id, bm25(paper_chunks_fts) AS score"
            " FROM paper_chunks_fts WHERE paper_chunks_fts MATCH ?)"
            " SELECT f.id, f.score FROM f JOIN paper_chunks c ON c.id = f.id WHERE c.part != 'references'"
        )
        params: list[Any] = [match]
        if paper_ids:
            sql += f" AND c.paper_id IN ({','.join('?' * len(paper_ids))})"
            params.extend(paper_ids)
        sql += " ORDER BY f.score LIMIT ?"
        params.append(int(limit))
        return [(int(r["id"]), float(r["score"])) for r in await self.db.fetchall(sql, params)]

    # -- embedding spaces ---------------------------------------------------------------------
    async def spaces(self) -> list[Space]:
        rows = await self.db.fetchall("SELECT name, backend, dim, kind FROM embedding_spaces ORDER BY name")
        return [Space(r["name"], r["backend"], int(r["dim"]), r["kind"]) for r in rows]

    async def ensure_space(self, backend: str, dim: int) -> Space:
        name = space_name(backend, dim)
        if name in self._spaces:
            return self._spaces[name]
        row = await self.db.fetchone("SELECT name, backend, dim, kind FROM embedding_spaces WHERE name = ?", (name,))
        if row is None:
            kind = "vec0" if self.db.info.vec_available else "blob"
            async with self.db.transaction():
                if kind == "vec0":
                    await self.db.execute(
                        f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING vec0(embedding float[{int(dim)}] distance_metric=cosine)"
                    )
                else:
                    await self.db.execute(f"CREATE TABLE IF NOT EXISTS {name} (rowid INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
                await self.db.execute(
                    "INSERT OR IGNORE INTO embedding_spaces (name, backend, dim, kind) VALUES (?, ?, ?, ?)",
                    (name, backend, int(dim), kind),
                )
            space = Space(name, backend, int(dim), kind)
        else:
            space = Space(row["name"], row["backend"], int(row["dim"]), row["kind"])
        self._spaces[name] = space
        return space

    async def put_vectors(self, space: Space, ids: Sequence[int], matrix: np.ndarray) -> None:
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        rows = [(int(i), matrix[n].tobytes()) for n, i in enumerate(ids)]
        await self.db.transact_sync(_put_vectors_sync, space.name, rows)

    async def missing_vectors(self, space: Space, *, paper_ids: Sequence[str] | None = None) -> list[ChunkRow]:
        """Body chunks with no vector in this space (new chunks, or a changed backend)."""
        sql = f"SELECT {_COLUMNS}, p.title AS title FROM paper_chunks c LEFT JOIN papers p ON p.id = c.paper_id" \
            f" WHERE c.part != 'references' AND c.id NOT IN (SELECT rowid FROM {space.name})"
        params: list[Any] = []
        if paper_ids:
            sql += f" AND c.paper_id IN ({','.join('?' * len(paper_ids))})"
            params.extend(paper_ids)
        return [ChunkRow.from_row(r) for r in await self.db.fetchall(sql + " ORDER BY c.id", params)]

    async def load_vectors(self, space: Space) -> tuple[np.ndarray, np.ndarray]:
        """Every vector of a space as (ids int64, matrix float32) — one pass on the db thread.

        A vec0 table is read through its chunk tables (validity bitmap, rowids and vectors
        of 1024 rows per blob): ~100 blob reads instead of 100k virtual-table row lookups.
        If that layout is not what this sqlite-vec version uses, the plain SELECT is used.
        """
        dim = space.dim

        def plain(conn: Any) -> tuple[np.ndarray, np.ndarray]:
            rows = conn.execute(f"SELECT rowid, embedding FROM {space.name}").fetchall()
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            blob = b"".join(r[1] for r in rows)
            matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), dim) if rows else np.zeros((0, dim), np.float32)
            return ids, matrix

        def chunked(conn: Any) -> tuple[np.ndarray, np.ndarray] | None:
            try:
                rows = conn.execute(
                    f"SELECT c.size, c.validity, c.rowids, v.vectors FROM {space.name}_chunks c"
                    f" JOIN {space.name}_vector_chunks00 v ON v.rowid = c.chunk_id ORDER BY c.chunk_id"
                ).fetchall()
                expected = conn.execute(f"SELECT count(*) FROM {space.name}_rowids").fetchone()[0]
            except Exception:  # noqa: BLE001 - another layout: use the plain path
                return None
            total = 0
            parsed = []
            for size, validity, rowids, vectors in rows:
                if len(rowids) != size * 8 or len(vectors) != size * dim * 4 or len(validity) * 8 < size:
                    return None
                valid = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[:size].astype(bool)
                count = int(valid.sum())
                parsed.append((size, valid, count, rowids, vectors))
                total += count
            if total != expected:
                return None
            ids = np.empty(total, np.int64)
            matrix = np.empty((total, dim), np.float32)
            at = 0
            for size, valid, count, rowids, vectors in parsed:
                chunk_ids = np.frombuffer(rowids, np.int64)
                chunk_vecs = np.frombuffer(vectors, np.float32).reshape(size, dim)
                if count == size:
                    ids[at : at + count] = chunk_ids
                    matrix[at : at + count] = chunk_vecs
                else:
                    ids[at : at + count] = chunk_ids[valid]
                    matrix[at : at + count] = chunk_vecs[valid]
                at += count
            return ids, matrix

        def read(conn: Any) -> tuple[np.ndarray, np.ndarray]:
            if space.kind == "vec0":
                fast = chunked(conn)
                if fast is not None:
                    return fast
            return plain(conn)

        return await self.db.run_sync(read)

    async def vector_stamp(self, space: Space) -> tuple[int, int]:
        """(row count, max rowid) of a space, cheaply: vec0 keeps them in its ``_rowids`` table
        (a count on the virtual table itself scans every vector)."""
        table = f"{space.name}_rowids" if space.kind == "vec0" else space.name
        try:
            row = await self.db.fetchone(f"SELECT count(*) AS n, coalesce(max(rowid), 0) AS m FROM {table}")
        except Exception:  # noqa: BLE001 - another vec0 layout: ask the virtual table
            row = await self.db.fetchone(f"SELECT count(*) AS n, coalesce(max(rowid), 0) AS m FROM {space.name}")
        return (int(row["n"]), int(row["m"])) if row else (0, 0)

    async def vector_count(self, space: Space) -> int:
        return (await self.vector_stamp(space))[0]

    async def knn(self, space: Space, query: np.ndarray, k: int, *, restrict: Sequence[int] | None = None) -> list[tuple[int, float]]:
        """sqlite-vec exact kNN (cosine distance, best first): the durable, cold-cache path."""
        blob = np.ascontiguousarray(query, dtype=np.float32).tobytes()
        if space.kind != "vec0":
            raise RuntimeError("kNN in SQL needs sqlite-vec; use the in-memory index")
        sql = f"SELECT rowid, distance FROM {space.name} WHERE embedding MATCH ? AND k = ?"
        params: list[Any] = [blob, int(k)]
        if restrict is not None:
            import json

            sql += " AND rowid IN (SELECT value FROM json_each(?))"
            params.append(json.dumps([int(i) for i in restrict]))
        rows = await self.db.fetchall(sql + " ORDER BY distance", params)
        return [(int(r["rowid"]), float(r["distance"])) for r in rows]
