"""The shared library on PostgreSQL: ``PaperStore`` and ``ChunkStore`` (store/repository.py) over asyncpg.

The same shapes as the SQLite repositories (``PaperRecord``, ``ChunkRow``, ``Space``), with what
sharing adds:

- **one copy per paper**: the identifier columns carry unique indexes, so two users adding the same
  paper at once collide on insert and the library service merges into the row that won;
- **parsed once**: ``parse_claim`` takes a PostgreSQL advisory lock on the paper for the whole parse
  (a second user's parse waits, then finds it parsed) and marks the row ``parsing_by`` meanwhile, so
  everyone's listing shows it as being parsed;
- **who may remove**: ``added_by`` is set on insert; only that user or one named in
  ``library_admins`` removes a paper;
- **full text** by BM25 over word → chunk postings (``term_postings``: per word and paper, the chunks
  holding it with their counts and lengths) made with FTS5's own tokenizer (``store/fts_terms.py``), so a
  search reads only its words' postings and scores every chunk as the SQLite library does; chunks written
  without postings (before they existed, or by an older version) are indexed in the background and
  meanwhile ranked from the stored ``tsvector`` (GIN, ``websearch_to_tsquery``); **vectors** in one table per embedding space — ``vector(dim)`` with an
  HNSW index when pgvector is there, else little-endian float32 bytes (``bytea``; spaces made by
  earlier versions hold ``real[]``, still read and written). Each user's in-memory index (exact, as
  with SQLite) follows other users' writes incrementally: every vector row carries the id of the
  transaction that wrote it and removals leave a tombstone, so ``changes_since`` returns just what
  changed after a snapshot's ``xmin``;
- **bulk writes in turn**: a paper's chunks and postings (and the background indexer's batches) are written
  one transaction at a time across the hub (``_take_write_turn``), so users adding papers leave cores to
  everyone's searches.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import hashlib
import json
import logging
import math
import os
from typing import Any, AsyncIterator, Iterable, Sequence

import numpy as np

from .. import background_cpu
from ..errors import NotFoundError, PermissionDenied, StoreError
from . import fts_terms
from .chunks import ChunkRow, Space, space_name
from .papers import METADATA_FIELDS, PaperRecord
from .pg import PgDatabase

PARSE_STALE_SECS = 3600  # a "being parsed" mark older than this is from a process that died mid-parse
BM25_K1, BM25_B = 1.2, 0.75  # FTS5's bm25() constants
MISSING_CHECK_SECS = 30.0  # how often a search may look for other users' chunks left without a vector
INDEX_BATCH_PAPERS = 20  # papers whose chunks one background indexing transaction takes
FLOAT32 = "float32"  # a space's kind without pgvector: bytea of little-endian float32 (earlier ones: "array", real[])
HNSW_EF_SEARCH = 100  # pgvector's HNSW candidate list (recall vs speed) for knn(exact=False)
WRITE_TURN_WAIT_SECS = 30.0  # how long a bulk write waits for its turn before it writes anyway
_JSON = {"authors", "keywords", "metadata"}
_COLUMNS = ("id", *METADATA_FIELDS, "pdf_path", "markdown_path", "state", "source", "metadata", "added_by")
_NOW = "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
_SELECT = (
    "SELECT p.*, CASE WHEN p.parsing_since > now() - make_interval(secs => {stale}) THEN p.parsing_by END AS parsing"
    " FROM papers p"
).format(stale=PARSE_STALE_SECS)


def library_user() -> str:
    """Who this process acts for: the hub's user name in a single-user server, else the login name."""
    return os.environ.get("JUPYTERHUB_USER") or getpass.getuser()


def _lock_key(paper_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(paper_id.encode(), digest_size=8).digest(), "big", signed=True)


WRITE_TURN = _lock_key("library-writes")  # the advisory lock the library's bulk writes take turns on


async def _take_write_turn(conn: Any) -> bool:
    """Wait (inside the caller's transaction) until no other bulk write to the library is running, for
    ``WRITE_TURN_WAIT_SECS`` at most; the turn ends with the transaction. Returns whether it was taken.

    Why turns: a paper's chunks and word postings are a few hundred milliseconds of PostgreSQL's CPU, and
    with every user of a hub adding papers at once that many backends took every core, so each search (a few
    milliseconds of work in the database and in its own process) waited behind them: ten users adding and
    searching on two cores, p95 search 223-249 ms with writes side by side, 113-167 ms with writes in
    turn, all the adds done in about the same time (benchmarks/bench_shared_library.py). The turn only orders
    writes; nothing depends on it for correctness, so a writer that holds it too long (a client stalled
    mid-transaction) delays the others by the wait at most."""
    from asyncpg.exceptions import LockNotAvailableError

    try:
        async with conn.transaction():  # a savepoint: a timed-out wait leaves the caller's transaction usable
            await conn.execute(f"SET LOCAL lock_timeout = {int(WRITE_TURN_WAIT_SECS * 1000)}")
            await conn.execute("SELECT pg_advisory_xact_lock($1)", WRITE_TURN)
            await conn.execute("SET LOCAL lock_timeout TO DEFAULT")
        return True
    except LockNotAvailableError:
        logging.getLogger(__name__).warning(
            "a shared-library write waited %g s for its turn; writing without it", WRITE_TURN_WAIT_SECS)
        return False


def _value(name: str, value: Any) -> Any:
    return json.dumps(value, ensure_ascii=False) if name in _JSON else value


def _record(row: Any) -> PaperRecord:
    return PaperRecord.from_row(dict(row))


class PgPaperRepository:
    """``PaperStore`` on the shared database, acting for ``user``."""

    def __init__(self, db: PgDatabase, *, user: str | None = None) -> None:
        self.db = db
        self.user = user or library_user()

    async def find(self, paper_id: str) -> PaperRecord | None:
        row = await self.db.fetchrow(f"{_SELECT} WHERE p.id = $1", paper_id)
        return None if row is None else _record(row)

    async def get(self, paper_id: str) -> PaperRecord:
        record = await self.find(paper_id)
        if record is None:
            raise NotFoundError(f"no paper {paper_id!r} in the library")
        return record

    async def find_by(self, *, arxiv_id: str | None = None, doi: str | None = None,
                      bibcode: str | None = None) -> PaperRecord | None:
        for clause, value in (("p.arxiv_id = $1", arxiv_id), ("lower(p.doi) = lower($1)", doi),
                              ("p.bibcode = $1", bibcode)):
            if value:
                row = await self.db.fetchrow(f"{_SELECT} WHERE {clause}", value)
                if row is not None:
                    return _record(row)
        return None

    async def find_by_sha256(self, digest: str) -> PaperRecord | None:
        row = await self.db.fetchrow(f"{_SELECT} WHERE (p.metadata::jsonb) ->> 'sha256' = $1 LIMIT 1", digest)
        return None if row is None else _record(row)

    async def find_many(self, *, arxiv_ids: list[str], dois: list[str], bibcodes: list[str]) -> list[PaperRecord]:
        if not (arxiv_ids or dois or bibcodes):
            return []
        rows = await self.db.fetch(
            f"{_SELECT} WHERE p.arxiv_id = ANY($1::text[]) OR lower(p.doi) = ANY($2::text[]) OR p.bibcode = ANY($3::text[])",
            list(arxiv_ids), [d.lower() for d in dois], list(bibcodes),
        )
        return [_record(r) for r in rows]

    async def insert(self, record: PaperRecord) -> PaperRecord:
        if not record.id:
            raise ValueError("a paper needs an id before it is stored")
        record.state = record.state or "metadata"
        record.added_by = self.user
        marks = ", ".join(f"${n}" for n in range(1, len(_COLUMNS) + 1))
        await self.db.execute(
            f"INSERT INTO papers ({', '.join(_COLUMNS)}) VALUES ({marks})",
            *[_value(c, getattr(record, c)) for c in _COLUMNS],
        )
        return await self.get(record.id)

    async def update(self, paper_id: str, **changes: Any) -> PaperRecord:
        unknown = set(changes) - set(_COLUMNS) - {"id"}
        if unknown:
            raise ValueError(f"unknown paper fields: {sorted(unknown)}")
        changes.pop("id", None)
        changes.pop("added_by", None)  # who added a paper never changes
        if changes:
            sets = ", ".join(f"{name} = ${n}" for n, name in enumerate(changes, start=2))
            status = await self.db.execute(
                f"UPDATE papers SET {sets}, updated_at = {_NOW} WHERE id = $1",
                paper_id, *[_value(k, v) for k, v in changes.items()],
            )
            if status.endswith(" 0"):
                raise NotFoundError(f"no paper {paper_id!r} in the library")
        return await self.get(paper_id)

    async def list(self, *, state: str | None = None, limit: int = 1000, offset: int = 0) -> list[PaperRecord]:
        if state:
            rows = await self.db.fetch(f"{_SELECT} WHERE p.state = $1 ORDER BY p.created_at DESC, p.id LIMIT $2 OFFSET $3",
                                       state, limit, offset)
        else:
            rows = await self.db.fetch(f"{_SELECT} ORDER BY p.created_at DESC, p.id LIMIT $1 OFFSET $2", limit, offset)
        return [_record(r) for r in rows]

    async def count(self) -> int:
        return int(await self.db.fetchval("SELECT count(*) FROM papers"))

    async def count_by_state(self) -> dict[str, int]:
        rows = await self.db.fetch("SELECT state, count(*) AS n FROM papers GROUP BY state")
        return {str(r["state"]): int(r["n"]) for r in rows}

    async def is_admin(self) -> bool:
        """Named in ``library_admins`` (by the hub's administrator: ``INSERT INTO library_admins VALUES ('name')``).
        Not "a superuser role": on a hub every user's server usually connects with the same role."""
        return bool(await self.db.fetchval("SELECT EXISTS (SELECT 1 FROM library_admins WHERE username = $1)", self.user))

    async def removal_refused(self, record: PaperRecord) -> str:
        if not record.added_by or record.added_by == self.user or await self.is_admin():
            return ""
        return (f"{record.id} was added to the shared library by {record.added_by}; only they or a library "
                "administrator can remove it")

    async def delete(self, paper_id: str) -> bool:
        record = await self.find(paper_id)
        if record is None:
            return False
        refused = await self.removal_refused(record)
        if refused:
            raise PermissionDenied(refused)
        return (await self.db.execute("DELETE FROM papers WHERE id = $1", paper_id)).endswith(" 1")

    @contextlib.asynccontextmanager
    async def parse_claim(self, paper_id: str) -> AsyncIterator[None]:
        """An advisory lock on the paper for the parse (held by one pooled connection), and the row
        marked as being parsed by this user meanwhile (committed at once: everyone sees it)."""
        async with self.db.acquire() as conn:
            await conn.execute("SELECT pg_advisory_lock($1)", _lock_key(paper_id))
            try:
                await conn.execute("UPDATE papers SET parsing_by = $2, parsing_since = now() WHERE id = $1",
                                   paper_id, self.user)
                yield
            finally:
                try:
                    await conn.execute("UPDATE papers SET parsing_by = NULL, parsing_since = NULL WHERE id = $1",
                                       paper_id)
                finally:
                    await conn.execute("SELECT pg_advisory_unlock($1)", _lock_key(paper_id))


def _float4_arrays(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    """One-dimensional ``real[]`` values in PostgreSQL's binary array format (a 20-byte header, then a
    length and a big-endian float per element) as one float32 matrix, decoded at once: row by row, the
    vectors other users wrote, which a search follows, cost ≈ 13 ms per thousand (384 dimensions, on this
    2-core machine under load); at once, under 1 ms."""
    width = 20 + 8 * dim
    if any(len(b) != width for b in blobs):
        raise StoreError(f"a stored vector is not {dim} floats")
    return _float4_rows(b"".join(blobs), len(blobs), dim)


def _vectors_blob(data: bytes, n: int, dim: int, kind: str) -> np.ndarray:
    """``n`` vectors sent back to back in one ``bytea`` (``string_agg`` of each row's binary form) as one
    float32 matrix: float32 bytes as stored, pgvector's ``vector_send`` (a 2-byte dimension, 2 unused bytes,
    big-endian floats) or a ``real[]``'s ``array_send`` (``_float4_arrays``). One value for all the rows a
    search follows: no row objects, no per-row decoding."""
    if kind == FLOAT32:
        if len(data) != 4 * dim * n:
            raise StoreError(f"a stored vector is not {dim} floats")
        return np.frombuffer(data, dtype="<f4").reshape(n, dim).copy()
    if kind != "pgvector":
        width = 20 + 8 * dim
        if len(data) != width * n:
            raise StoreError(f"a stored vector is not {dim} floats")
        return _float4_rows(data, n, dim)
    if len(data) != (4 + 4 * dim) * n:
        raise StoreError(f"a stored vector is not {dim} floats")
    if n and (np.frombuffer(data, dtype=">i2").reshape(n, 2 + 2 * dim)[:, 0] != dim).any():
        raise StoreError(f"a stored vector is not {dim} floats")
    return np.frombuffer(data, dtype=">f4").reshape(n, 1 + dim)[:, 1:].astype(np.float32)


def _float4_rows(data: bytes, n: int, dim: int) -> np.ndarray:
    """``n`` binary ``real[]`` values back to back (each ``20 + 8 * dim`` bytes) as float32."""
    width = 20 + 8 * dim
    pairs = np.frombuffer(data, dtype=">i4").reshape(n, width // 4)[:, 5:].reshape(n, dim, 2)
    if (pairs[:, :, 0] != 4).any():
        raise StoreError("a stored vector has a null element")
    return np.ascontiguousarray(pairs[:, :, 1]).view(">f4").astype(np.float32)


def _text_array(values: Sequence[str]) -> str:
    """A PostgreSQL array literal of these strings, every element quoted (backslash and quote escaped)."""
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"


def _int_array(values: Sequence[int]) -> str:
    return "{" + ",".join(map(str, values)) + "}"


# the write counter: a fresh sequence reads last_value 1 before and after its first nextval, is_called tells them apart
_DATA_VERSION = "(SELECT last_value + is_called::int FROM library_changes)"
_CHUNK_COLUMNS = "c.id, c.paper_id, c.seq, c.section, c.part, c.page_start, c.page_end, c.text"


def _chunk(row: Any) -> ChunkRow:
    return ChunkRow.from_row(dict(row))


class PgChunkRepository:
    """``ChunkStore`` on the shared database."""

    # every other user's write changes data_version; their parses store their own vectors, so the search
    # path's look for chunks without one (rag.sync: an anti-join over every chunk) runs at most this often
    missing_check_secs = MISSING_CHECK_SECS

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self._spaces: dict[str, Space] = {}
        self._stats_version: int | None = None  # data_version the BM25 statistics below are from
        self._stats: tuple[int, float] = (0, 1.0)  # (chunks, average length)
        self._df: dict[str, int] = {}  # lexeme → chunks holding it
        self._own_terms = fts_terms.available()  # postings need FTS5's tokenizer in this Python
        self._terms_version: int | None = None  # data_version the postings state below is from
        self._terms_ready = False  # every chunk has its postings
        self._indexing: asyncio.Task[int] | None = None

    async def data_version(self) -> int:
        return int(await self.db.fetchval(f"SELECT {_DATA_VERSION}"))

    # -- chunks --------------------------------------------------------------------------
    async def replace(self, paper_id: str, chunks: Sequence[Any]) -> list[int]:
        """Drop a paper's chunks (their vectors and postings go by cascade and trigger, vectors leaving
        tombstones), insert the new ones with the paper's word postings and BM25 statistics."""
        # tokenizing a paper's chunks is ingest work: below the searches' CPU priority (background_cpu)
        terms = await background_cpu.run(fts_terms.chunk_terms, [(c.text, c.section) for c in chunks]) \
            if chunks and self._own_terms else None
        async with self.db.transaction() as conn:
            await conn.execute("SELECT nextval('library_changes')")
            # the background indexer takes a paper under this lock: it never writes postings for chunks replaced here
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _lock_key("terms:" + paper_id))
            await _take_write_turn(conn)  # after the paper's lock, as the indexer takes them: no deadlock
            await conn.execute("DELETE FROM paper_chunks WHERE paper_id = $1", paper_id)
            if not chunks:
                await conn.execute("DELETE FROM paper_term_stats WHERE paper_id = $1", paper_id)
                await conn.execute("DELETE FROM postings_pending WHERE paper_id = $1", paper_id)
                return []
            rows = await conn.fetch(
                "INSERT INTO paper_chunks (paper_id, seq, section, part, page_start, page_end, text, fts_length)"
                " SELECT $1, * FROM unnest($2::int[], $3::text[], $4::text[], $5::int[], $6::int[], $7::text[],"
                " $8::int[]) RETURNING id, seq",
                paper_id, [c.seq for c in chunks], [c.section for c in chunks], [c.part for c in chunks],
                [c.page_start for c in chunks], [c.page_end for c in chunks], [c.text for c in chunks],
                [t[0] for t in terms] if terms is not None else [None] * len(chunks),
            )
            by_seq = {r["seq"]: int(r["id"]) for r in rows}
            ids = [by_seq[c.seq] for c in chunks]
            if terms is not None:  # else the insert left the paper in postings_pending: indexed in the background
                await self._write_postings(conn, [paper_id] * len(ids), ids, [c.part for c in chunks], terms)
        return ids

    @staticmethod
    async def _write_postings(conn: Any, paper_ids: Sequence[str], ids: Sequence[int], parts: Sequence[str],
                              terms: Sequence[tuple[int, dict[str, int]]]) -> None:
        """The term postings of these chunks (their papers' old ones already gone), each paper's BM25 statistics,
        and the papers off the pending list. One statement for all postings: a row per (term, paper, searchable)."""
        rows = [(term, paper_id, searchable, chunk_id, tf, length)
                for paper_id, chunk_id, part, (length, counts) in zip(paper_ids, ids, parts, terms)
                for searchable in (part != "references",) for term, tf in counts.items()]
        if rows:
            # each column as one array literal (a str the server parses; 7 ms per paper to build): asyncpg encoding
            # six Python lists of a paper's ~6,000 postings checked every element's type, on the event loop at the
            # searches' priority (profiled user with ten adding: 200k isinstance calls, 0.56 s of its session)
            term, paper, searchable, chunk, tf, dl = zip(*rows)
            await conn.execute(
                "INSERT INTO term_postings (term, paper_id, searchable, chunk_ids, tfs, dls)"
                " SELECT u.term, u.paper_id, u.searchable, array_agg(u.chunk_id ORDER BY u.chunk_id),"
                " array_agg(u.tf ORDER BY u.chunk_id), array_agg(u.dl ORDER BY u.chunk_id)"
                " FROM unnest($1::text::text[], $2::text::text[], $3::text::boolean[], $4::text::bigint[],"
                " $5::text::int[], $6::text::int[]) u(term, paper_id, searchable, chunk_id, tf, dl)"
                " GROUP BY u.term, u.paper_id, u.searchable",
                _text_array(term), _text_array(paper), "{" + ",".join("t" if b else "f" for b in searchable) + "}",
                _int_array(chunk), _int_array(tf), _int_array(dl))
        stats: dict[str, tuple[int, int]] = {}
        for paper_id, (length, _counts) in zip(paper_ids, terms):
            n, tokens = stats.get(paper_id, (0, 0))
            stats[paper_id] = (n + 1, tokens + length)
        await conn.execute(
            "INSERT INTO paper_term_stats (paper_id, chunks, tokens) SELECT * FROM unnest($1::text[], $2::int[],"
            " $3::bigint[]) ON CONFLICT (paper_id) DO UPDATE SET chunks = EXCLUDED.chunks, tokens = EXCLUDED.tokens",
            list(stats), [v[0] for v in stats.values()], [v[1] for v in stats.values()])
        await conn.execute("DELETE FROM postings_pending WHERE paper_id = ANY($1::text[])", list(stats))

    async def removed_ids(self, paper_id: str) -> list[int]:
        return [int(r["id"]) for r in await self.db.fetch("SELECT id FROM paper_chunks WHERE paper_id = $1", paper_id)]

    async def for_paper(self, paper_id: str, *, part: str | None = None) -> list[ChunkRow]:
        if part:
            rows = await self.db.fetch(f"SELECT {_CHUNK_COLUMNS} FROM paper_chunks c WHERE c.paper_id = $1 AND c.part = $2"
                                       " ORDER BY c.seq", paper_id, part)
        else:
            rows = await self.db.fetch(f"SELECT {_CHUNK_COLUMNS} FROM paper_chunks c WHERE c.paper_id = $1 ORDER BY c.seq",
                                       paper_id)
        return [_chunk(r) for r in rows]

    async def get_many(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        ids = [int(i) for i in ids]
        if not ids:
            return {}
        rows = await self.db.fetch(
            f"SELECT {_CHUNK_COLUMNS}, p.title AS title FROM paper_chunks c LEFT JOIN papers p ON p.id = c.paper_id"
            " WHERE c.id = ANY($1::bigint[])", ids)
        return {int(r["id"]): _chunk(r) for r in rows}

    async def count(self, paper_id: str | None = None) -> int:
        if paper_id is None:
            return int(await self.db.fetchval("SELECT count(*) FROM paper_chunks"))
        return int(await self.db.fetchval("SELECT count(*) FROM paper_chunks WHERE paper_id = $1", paper_id))

    async def searchable_count(self) -> int:
        return int(await self.db.fetchval("SELECT count(*) FROM paper_chunks WHERE part <> 'references'"))

    async def ids_for_papers(self, paper_ids: Sequence[str]) -> list[int]:
        rows = await self.db.fetch("SELECT id FROM paper_chunks WHERE paper_id = ANY($1::text[]) AND part <> 'references'",
                                   list(paper_ids))
        return [int(r["id"]) for r in rows]

    async def _bm25_stats(self, lexemes: list[str]) -> tuple[float, list[float]]:
        """(average chunk length, IDF per lexeme) as FTS5 computes them, cached until the next write."""
        version = await self.data_version()
        if self._stats_version != version:
            row = await self.db.fetchrow("SELECT count(*) AS n, coalesce(avg(ntokens), 1) AS avgdl FROM paper_chunks")
            self._stats = (int(row["n"]), float(row["avgdl"]) or 1.0)
            self._df.clear()
            self._stats_version = version
        unknown = [lx for lx in lexemes if lx not in self._df]
        if unknown:
            rows = await self.db.fetch(
                "SELECT lx, (SELECT count(*) FROM paper_chunks WHERE tsv @@ to_tsquery('simple', quote_literal(lx)))"
                " AS n FROM unnest($1::text[]) lx", unknown)
            self._df.update({r["lx"]: int(r["n"]) for r in rows})
        total, avgdl = self._stats
        idf = [max(math.log((total - self._df[lx] + 0.5) / (self._df[lx] + 0.5)), 1e-6) for lx in lexemes]
        return avgdl, idf

    async def _fts_tsvector(self, match: str, limit: int, paper_ids: Sequence[str] | None) -> list[tuple[int, float]]:
        """While chunks wait for their postings (a database migrated from before them, or chunks written by an
        older version): chunks matching ``websearch_to_tsquery`` over their stored ``tsvector`` (GIN), ranked by
        BM25 with PostgreSQL's tokens (term counts from the tsvector's positions, lengths from ``ntokens``)."""
        lexemes = [str(r[0]) for r in await self.db.fetch(
            "SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('astro_english', $1))) ORDER BY 1", match)]
        if not lexemes:
            return []
        avgdl, idf = await self._bm25_stats(lexemes)
        sql = (f"SELECT c.id, sum(q.idf * cardinality(u.positions) * {BM25_K1 + 1}"
               f" / (cardinality(u.positions) + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * c.ntokens / $4::float8))) AS score"
               " FROM paper_chunks c CROSS JOIN websearch_to_tsquery('astro_english', $1) wq"
               " CROSS JOIN LATERAL unnest(c.tsv) u JOIN unnest($2::text[], $3::float8[]) q(lexeme, idf) ON q.lexeme = u.lexeme"
               " WHERE c.tsv @@ wq AND c.part <> 'references'")
        args: list[Any] = [match, lexemes, idf, avgdl, int(limit)]
        if paper_ids:
            sql += " AND c.paper_id = ANY($6::text[])"
            args.append(list(paper_ids))
        rows = await self.db.fetch(sql + " GROUP BY c.id ORDER BY score DESC, c.id LIMIT $5", *args)
        return [(int(r["id"]), -float(r["score"])) for r in rows]

    async def _lexical_state(self) -> bool:
        """Whether every paper's chunks have their postings, asked again after each write while some wait for
        theirs (starts indexing them). Once they all have, ``fts`` learns of new ones from its own query."""
        row = await self.db.fetchrow(
            f"SELECT {_DATA_VERSION} AS v, EXISTS (SELECT 1 FROM postings_pending) AS pending")
        version = int(row["v"])
        if self._terms_version != version:
            self._terms_version = version
            self._terms_ready = not row["pending"]
            if row["pending"]:
                self.start_indexing()
        return self._terms_ready

    async def fts(self, match: str, limit: int, *, paper_ids: Sequence[str] | None = None) -> list[tuple[int, float]]:
        """Front-matter and body chunks holding any phrase of the sanitised FTS5 expression (``"a" OR "b"``),
        ranked by BM25 exactly as FTS5 ranks (k1 1.2, b 0.75, its IDF, every phrase counted), negated like
        FTS5's bm25. PostgreSQL's ``ts_rank`` has no IDF: on the labelled set its top 3 differed from SQLite's
        in most questions.

        The question's words' rows of ``term_postings`` (an index scan on the word) hold every chunk with them,
        the word's count in each and each chunk's length: a search reads those rows and no chunk's. Reading
        each candidate chunk's jsonb counts instead (0002's ``chunk_terms``) cost a heap page per candidate:
        on 100k chunks p95 67 ms against 20 ms now, max 183 against 55.

        One round trip: the library's chunk count and average length (``paper_term_stats``, a row per paper)
        and whether any paper waits for its postings are read by the same statement. Asked apart, after each
        other user's write (every search, with ten users adding), they were two more round trips before this
        one — each 10–36 ms on a loaded machine."""
        if not self._own_terms or (not self._terms_ready and not await self._lexical_state()):
            return await self._fts_tsvector(match, limit, paper_ids)
        terms = fts_terms.query_terms(match)  # cached; a fraction of a millisecond otherwise
        if not terms:
            return []
        # each phrase's IDF from how many chunks hold its term (references too, as FTS5 counts), then per chunk
        # each phrase's count (one row per chunk and term: unnested in the select list, not a function scan per
        # row), then BM25 summed over the phrases (repeats included) in FTS5's order of arithmetic
        n = len(terms)
        args: list[Any] = [sorted(set(terms)), int(limit), *terms]
        dfs = ", ".join(f"coalesce(sum(cardinality(p.chunk_ids)) FILTER (WHERE p.term = ${3 + i}::text), 0)::float8"
                        f" AS d{i}" for i in range(n))
        tfs = ", ".join(f"(max(u.tf) FILTER (WHERE u.term = ${3 + i}::text))::float8 AS f{i}" for i in range(n))
        # in double precision, as FTS5 computes it (numeric ln was both slower and not FTS5's rounding)
        idfs = ", ".join(f"CASE WHEN ln((s.n - d{i} + 0.5::float8) / (d{i} + 0.5::float8)) <= 0 THEN 1e-6::float8"
                         f" ELSE ln((s.n - d{i} + 0.5::float8) / (d{i} + 0.5::float8)) END AS w{i}"
                         for i in range(n))
        score = " + ".join(f"coalesce(w.w{i} * ((c.f{i} * {BM25_K1 + 1}) / (c.f{i} + c.norm)), 0)" for i in range(n))
        # the statistics as the old per-version query computed them in Python: n = Σ chunks, avgdl = Σ tokens / n
        stats = ("s AS MATERIALIZED (SELECT coalesce(sum(chunks), 0)::float8 AS n, CASE WHEN coalesce(sum(chunks), 0) = 0"
                 " THEN 1::float8 ELSE sum(tokens)::float8 / sum(chunks)::float8 END AS avgdl FROM paper_term_stats)")
        only = ""
        if paper_ids:
            args.append(list(paper_ids))
            only = f" AND p.paper_id = ANY(${len(args)}::text[])"
        sql = (f"WITH {stats}, p AS MATERIALIZED (SELECT term, paper_id, searchable, chunk_ids, tfs, dls"
               " FROM term_postings WHERE term = ANY($1::text[])),"
               f" d AS (SELECT {dfs} FROM p), w AS MATERIALIZED (SELECT {idfs} FROM d, s),"
               " u AS (SELECT p.term, unnest(p.chunk_ids) AS chunk_id, unnest(p.tfs) AS tf, unnest(p.dls) AS dl"
               f" FROM p WHERE p.searchable{only}),"
               f" c AS (SELECT u.chunk_id, {tfs}, {BM25_K1}::float8 * (1::float8 - {BM25_B}::float8 + {BM25_B}::float8"
               " * max(u.dl) / s.avgdl) AS norm FROM u, s GROUP BY u.chunk_id, s.avgdl)"
               f" (SELECT c.chunk_id, {score} AS score, NULL::boolean AS pending FROM c, w"
               " ORDER BY score DESC, c.chunk_id LIMIT $2)"
               " UNION ALL SELECT NULL, NULL, EXISTS (SELECT 1 FROM postings_pending)")
        rows = await self.db.fetch(sql, *args)
        if any(r["pending"] for r in rows):  # chunks written without postings (an older version): index them, rank by tsvector
            self._terms_ready, self._terms_version = False, None
            await self._lexical_state()
            return await self._fts_tsvector(match, limit, paper_ids)
        return [(int(r["chunk_id"]), -float(r["score"])) for r in rows if r["pending"] is None]

    # -- postings for chunks written without them ---------------------------------------------
    def start_indexing(self) -> None:
        """Index chunks that have no postings yet in the background (one task per process; processes
        share the work paper by paper)."""
        if self._indexing is None or self._indexing.done():
            self._indexing = asyncio.get_running_loop().create_task(self._index_pending(), name="astro-chunk-terms")

    async def _index_pending(self) -> int:
        done = 0
        try:
            while True:
                n = await self.index_pending_batch()
                if n == 0:
                    return done
                done += n
        except Exception:  # noqa: BLE001 - retried after the next write; searches use the tsvector ranking meanwhile
            logging.getLogger(__name__).warning("indexing the shared library's chunks failed", exc_info=True)
            self._terms_version = None
            return done

    async def index_pending_batch(self, papers: int = INDEX_BATCH_PAPERS) -> int:
        """Write the postings of up to ``papers`` pending papers (``postings_pending``: chunks written without
        them); returns how many papers (0: none left that another process is not already doing). A paper is
        taken whole under an advisory lock that ``replace`` also takes, so its postings and statistics are
        written by one transaction at a time."""
        async with self.db.transaction() as conn:
            candidates = [r["paper_id"] for r in await conn.fetch(
                "SELECT paper_id FROM postings_pending ORDER BY paper_id LIMIT $1", papers * 4)]
            taken = [p for p in candidates
                     if await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", _lock_key("terms:" + p))][:papers]
            if taken:  # still pending now that they are ours (another process may have done them meanwhile)
                taken = [r["paper_id"] for r in await conn.fetch(
                    "DELETE FROM postings_pending WHERE paper_id = ANY($1::text[]) RETURNING paper_id", taken)]
            if not taken:
                return 0
            rows = await conn.fetch(
                "SELECT id, paper_id, part, text, section FROM paper_chunks WHERE paper_id = ANY($1::text[])"
                " ORDER BY id", taken)
            terms = await background_cpu.run(fts_terms.chunk_terms, [(r["text"], r["section"]) for r in rows]) \
                if rows else []
            await _take_write_turn(conn)  # once the words are counted: the turn is held for the writes only
            await conn.execute("SELECT nextval('library_changes')")
            await conn.execute("DELETE FROM term_postings WHERE paper_id = ANY($1::text[])", taken)
            await conn.execute("DELETE FROM paper_term_stats WHERE paper_id = ANY($1::text[])", taken)
            if rows:
                ids = [int(r["id"]) for r in rows]
                await conn.execute(
                    "UPDATE paper_chunks c SET fts_length = u.n FROM unnest($1::bigint[], $2::int[]) u(id, n)"
                    " WHERE c.id = u.id AND c.fts_length IS DISTINCT FROM u.n", ids, [t[0] for t in terms])
                await self._write_postings(conn, [r["paper_id"] for r in rows], ids, [r["part"] for r in rows], terms)
            return len(taken)

    async def aclose(self) -> None:
        task, self._indexing = self._indexing, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- embedding spaces ---------------------------------------------------------------------
    async def spaces(self) -> list[Space]:
        rows = await self.db.fetch("SELECT name, backend, dim, kind FROM embedding_spaces ORDER BY name")
        return [Space(r["name"], r["backend"], int(r["dim"]), r["kind"]) for r in rows]

    async def ensure_space(self, backend: str, dim: int) -> Space:
        name = space_name(backend, dim)
        if name in self._spaces:
            return self._spaces[name]
        row = await self.db.fetchrow("SELECT name, backend, dim, kind FROM embedding_spaces WHERE name = $1", name)
        if row is None:
            await self.db.pool()  # vector support is known once connected
            # without pgvector, float32 bytes: what a search follows is then copied out as stored, where a real[]
            # went through array_send (34 ms per search inside PostgreSQL with ten users adding, on the cores
            # their searches share) and twice the bytes
            kind = "pgvector" if self.db.vector.available else FLOAT32
            column = f"vector({int(dim)})" if kind == "pgvector" else \
                f"bytea CHECK (octet_length(embedding) = {4 * int(dim)})"
            async with self.db.transaction() as conn:
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _lock_key("space:" + name))
                await conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {name} (chunk_id bigint PRIMARY KEY REFERENCES paper_chunks (id)"
                    f" ON DELETE CASCADE, embedding {column} NOT NULL, xid xid8 NOT NULL DEFAULT pg_current_xact_id())")
                await conn.execute(f"CREATE INDEX IF NOT EXISTS {name}_xid ON {name} (xid)")
                # no HNSW index yet: searches are exact in each user's memory (services/vector_index.py) and
                # never read one, while keeping it up to date was most of PostgreSQL's CPU with ten users adding
                # papers (≈ 1,000 of 1,200 busy-backend samples, on CPU in the vector INSERT, against 90 for the
                # word postings): built by ``ensure_ann_index`` once a space outgrows the in-memory index
                await conn.execute(
                    f"CREATE OR REPLACE TRIGGER {name}_removed AFTER DELETE ON {name}"
                    " FOR EACH ROW EXECUTE FUNCTION astro_vector_removed()")
                await conn.execute(
                    "INSERT INTO embedding_spaces (name, backend, dim, kind) VALUES ($1, $2, $3, $4)"
                    " ON CONFLICT (name) DO NOTHING", name, backend, int(dim), kind)
                row = await conn.fetchrow("SELECT name, backend, dim, kind FROM embedding_spaces WHERE name = $1", name)
        space = Space(row["name"], row["backend"], int(row["dim"]), row["kind"])
        self._spaces[name] = space
        return space

    async def ensure_ann_index(self, space: Space) -> bool:
        """Build pgvector's HNSW index on the space (``CREATE INDEX CONCURRENTLY``: writers and readers go on),
        for kNN in PostgreSQL once a space is too large for the in-memory index; True once it exists. One
        process builds it (an advisory lock; the others return False meanwhile and search exactly)."""
        if space.kind != "pgvector":
            return False
        index = f"{space.name}_hnsw"
        async with self.db.acquire() as conn:
            if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL AND (SELECT indisvalid FROM pg_index"
                                   " WHERE indexrelid = to_regclass($1))", index):
                return True
            if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", _lock_key("hnsw:" + space.name)):
                return False
            try:
                if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", index):  # left invalid by a failed build
                    await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")
                await conn.execute(
                    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index} ON {space.name} USING hnsw (embedding vector_cosine_ops)")
                return True
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1)", _lock_key("hnsw:" + space.name))

    @staticmethod
    def _encode(space: Space, row: np.ndarray) -> Any:
        if space.kind == FLOAT32:
            return row.astype("<f4").tobytes()
        return row if space.kind == "pgvector" else row.tolist()

    async def put_vectors(self, space: Space, ids: Sequence[int], matrix: np.ndarray) -> None:
        """Upsert; a chunk removed meanwhile (another user re-parsed its paper) is skipped, not an error."""
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        rows = [(int(i), self._encode(space, matrix[n])) for n, i in enumerate(ids)]
        async with self.db.transaction() as conn:
            await conn.execute("SELECT nextval('library_changes')")
            await conn.executemany(
                f"INSERT INTO {space.name} (chunk_id, embedding) SELECT $1, $2"
                " WHERE EXISTS (SELECT 1 FROM paper_chunks WHERE id = $1)"
                " ON CONFLICT (chunk_id) DO UPDATE SET embedding = EXCLUDED.embedding, xid = pg_current_xact_id()",
                rows,
            )

    async def missing_vectors(self, space: Space, *, paper_ids: Sequence[str] | None = None) -> list[ChunkRow]:
        """Searchable chunks with no vector in this space, except those of a paper someone is parsing now
        (that parse writes them: embedding them too would only race it; every search after each other
        user's write asks this). The ids come from a partial index on searchable chunks, not the chunks' rows."""
        sql = (f"SELECT {_CHUNK_COLUMNS}, p.title AS title FROM paper_chunks c JOIN papers p ON p.id = c.paper_id"
               " WHERE c.id IN (SELECT s.id FROM paper_chunks s WHERE s.part <> 'references'"
               f" AND NOT EXISTS (SELECT 1 FROM {space.name} v WHERE v.chunk_id = s.id))"
               f" AND NOT coalesce(p.parsing_since > now() - make_interval(secs => {PARSE_STALE_SECS}), false)")
        args: list[Any] = []
        if paper_ids:
            sql += " AND c.paper_id = ANY($1::text[])"
            args.append(list(paper_ids))
        return [_chunk(r) for r in await self.db.fetch(sql + " ORDER BY c.id", *args)]

    def _matrix(self, space: Space, rows: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        if not rows:
            return ids, np.zeros((0, space.dim), np.float32)
        if space.kind == "pgvector":
            matrix = np.stack([r[1].to_numpy() for r in rows]).astype(np.float32, copy=False)
        elif space.kind == FLOAT32:
            matrix = _vectors_blob(b"".join(r[1] for r in rows), len(rows), space.dim, FLOAT32)
        elif isinstance(rows[0][1], bytes):
            matrix = _float4_arrays([r[1] for r in rows], space.dim)
        else:
            matrix = np.array([r[1] for r in rows], dtype=np.float32)
        return ids, matrix.reshape(len(rows), space.dim)

    @staticmethod
    def _embedding_column(space: Space) -> str:
        """A ``real[]`` is read in its binary form (``array_send``): as Python floats, 100k × 384 took 40 s."""
        return "array_send(embedding)" if space.kind == "array" else "embedding"

    async def load_vectors(self, space: Space) -> tuple[np.ndarray, np.ndarray]:
        return self._matrix(space, await self.db.fetch(
            f"SELECT chunk_id, {self._embedding_column(space)} FROM {space.name}"))

    async def vector_mark(self) -> str:
        """The current snapshot's xmin: every change not visible now comes from a transaction ≥ it."""
        return str(await self.db.fetchval("SELECT pg_snapshot_xmin(pg_current_snapshot())::text"))

    async def changes_since(self, space: Space, mark: str) -> tuple[np.ndarray, np.ndarray, list[int], str]:
        """(ids, vectors) written and ids removed by transactions from ``mark`` on, and the next mark.
        One statement, so one snapshot for all three parts without a transaction around them (every search
        asks this: BEGIN, three queries and COMMIT were five round trips, one is enough).

        The vectors come as one ``bytea`` (each row's binary send form, concatenated in the server) and are
        decoded at once: row by row, 1,000 vectors (one paper another user added) cost 8 ms of this process's
        CPU in row objects and per-row decoding, on the cores every user's search shares.

        The mark is the snapshot's xmin and the committed transactions at or after it already read
        (``xmin:x1,x2``): while any writer is mid-transaction the xmin stays behind it, and every search
        read again all that the others committed since — with ten users adding papers, thousands of vectors
        each time. A transaction seen committed writes nothing more (a later change carries a new xid)."""
        base, _, rest = mark.partition(":")
        seen = [x for x in rest.split(",") if x]
        send = {"pgvector": "vector_send(embedding)", "array": "array_send(embedding)"}.get(space.kind, "embedding")
        row = await self.db.fetchrow(
            f"WITH v AS (SELECT chunk_id, {send} AS e, xid FROM {space.name}"
            " WHERE xid >= $1::text::xid8 AND xid <> ALL($3::text[]::xid8[])),"
            " t AS (SELECT t.chunk_id, t.xid FROM vector_tombstones t WHERE t.space = $2"
            " AND t.xid >= $1::text::xid8 AND t.xid <> ALL($3::text[]::xid8[])"
            f" AND NOT EXISTS (SELECT 1 FROM {space.name} v WHERE v.chunk_id = t.chunk_id))"
            " SELECT (SELECT array_agg(chunk_id ORDER BY chunk_id) FROM v) AS ids,"
            " (SELECT string_agg(e, ''::bytea ORDER BY chunk_id) FROM v) AS blob,"
            " (SELECT array_agg(DISTINCT xid::text) FROM v) AS vx,"
            " (SELECT array_agg(chunk_id) FROM t) AS removed, (SELECT array_agg(DISTINCT xid::text) FROM t) AS tx,"
            " pg_snapshot_xmin(pg_current_snapshot())::text AS next", base, space.name, seen)
        ids = np.array(row["ids"] or [], dtype=np.int64)
        matrix = _vectors_blob(row["blob"] or b"", len(ids), space.dim, space.kind).reshape(len(ids), space.dim)
        nxt = int(row["next"])
        kept = sorted({int(x) for x in seen} | {int(x) for x in (row["vx"] or [])} | {int(x) for x in (row["tx"] or [])})
        mark = ":".join([str(nxt), ",".join(str(x) for x in kept if x >= nxt)]).rstrip(":")
        return ids, matrix, [int(i) for i in (row["removed"] or [])], mark

    async def vector_stamp(self, space: Space) -> tuple[int, int]:
        row = await self.db.fetchrow(f"SELECT count(*) AS n, coalesce(max(chunk_id), 0) AS m FROM {space.name}")
        return (int(row["n"]), int(row["m"])) if row else (0, 0)

    async def vector_count(self, space: Space) -> int:
        return (await self.vector_stamp(space))[0]

    async def knn(self, space: Space, query: np.ndarray, k: int, *, restrict: Sequence[int] | None = None,
                  exact: bool = False) -> list[tuple[int, float]]:
        """pgvector kNN by cosine distance, best first: through the HNSW index when it exists
        (``ensure_ann_index``), or ``exact`` (a scan)."""
        if space.kind != "pgvector":
            raise StoreError("kNN in SQL needs pgvector; use the in-memory index")
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
        sql = f"SELECT chunk_id, embedding <=> $1 AS d FROM {space.name}"
        args: list[Any] = [q, int(k)]
        if restrict is not None:
            sql += " WHERE chunk_id = ANY($3::bigint[])"
            args.append([int(i) for i in restrict])
        async with self.db.transaction() as conn:
            if exact:
                await conn.execute("SET LOCAL enable_indexscan = off")
            else:
                await conn.execute(f"SET LOCAL hnsw.ef_search = {max(HNSW_EF_SEARCH, int(k))}")
            rows = await conn.fetch(sql + " ORDER BY d LIMIT $2", *args)
        return [(int(r["chunk_id"]), float(r["d"])) for r in rows]
