"""The kNN hot path: an in-memory, normalised float32 matrix per embedding space.

sqlite-vec stays the durable store, but its exact scan costs ≈ 80 ms over 100k × 384 here,
while a matrix-vector product over the same (normalised) rows costs ≈ 9 ms — the memory
bandwidth floor. So each space is loaded once from its vector table (lazily, on the first
search) and kept in sync by the service that writes vectors (``add``/``remove``). Results
are exact (the same dot products), so recall@10 equals NumPy's brute force.

Writes by *another* process (the kernel and the server share the file) are noticed through
``PRAGMA data_version``; the cache then compares row count and max rowid and reloads when
they differ. Spaces larger than ``max_rows`` are never cached: they use sqlite-vec MATCH.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from ..store.chunks import ChunkRepository, Space

HEADROOM = 0.25  # rows reserved past a loaded matrix's end, as a share of its rows
INLINE_MAX = 2_000_000  # rows × dim below which a search is cheaper than a thread hop (≈ 0.5 ms)


def _last_rows(ids: Sequence[int], rows: np.ndarray) -> tuple[list[int], np.ndarray]:
    """Each id once, in order of first appearance, with the last row given for it (as writing row by row)."""
    keys = [int(i) for i in dict.fromkeys(int(i) for i in ids)]
    if len(keys) != len(ids):
        last = {int(i): n for n, i in enumerate(ids)}
        rows = np.asarray(rows)[[last[k] for k in keys]]
    return keys, rows


@dataclass
class _Matrix:
    dim: int
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    rows: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), np.float32))
    size: int = 0
    _pos: dict[int, int] | None = None
    readers: int = 0  # searches running in worker threads (changed on the event loop only)

    @classmethod
    def build(cls, dim: int, ids: np.ndarray, rows: np.ndarray) -> "_Matrix":
        """With room past the end (``HEADROOM``): the vectors added next (a shared library's other users'
        papers, followed by every search) go there; a matrix built full was copied whole by the first of them,
        83 ms at 100k × 384 on this machine, in that search's time. Untouched, the room costs no memory
        (``np.zeros`` maps its pages on first write)."""
        n = len(ids)
        cap = n + max(1024, int(n * HEADROOM))
        m = cls(dim)
        m.ids = np.zeros(cap, np.int64)
        m.ids[:n] = ids
        m.rows = np.zeros((cap, dim), np.float32)
        m.rows[:n] = np.asarray(rows, dtype=np.float32).reshape(n, dim)
        m.size = n
        return m

    @property
    def pos(self) -> dict[int, int]:
        """chunk id → row, built on first need (deletes, paper filters), not at load time."""
        if self._pos is None:
            self._pos = dict(zip(self.ids[: self.size].tolist(), range(self.size)))
        return self._pos

    def _grow(self, extra: int) -> None:
        need = self.size + extra
        if need <= len(self.ids):
            return
        cap = max(need, 2 * len(self.ids), 1024)
        ids = np.zeros(cap, np.int64)
        rows = np.zeros((cap, self.dim), np.float32)
        ids[: self.size] = self.ids[: self.size]
        rows[: self.size] = self.rows[: self.size]
        self.ids, self.rows = ids, rows
        self.pos  # noqa: B018 - materialise the id map before rows move around

    def add(self, ids: Sequence[int], rows: np.ndarray) -> None:
        """Append (replacing rows already there) in one slice: a search following another user's paper adds
        its thousand vectors, row by row a Python loop in that search's time."""
        keys, rows = _last_rows(ids, rows)
        self.remove(keys)
        n, start = len(keys), self.size
        self._grow(n)
        self.ids[start:start + n] = keys
        self.rows[start:start + n] = np.asarray(rows, dtype=np.float32).reshape(n, self.dim)
        self.pos.update(zip(keys, range(start, start + n)))
        self.size += n

    def remove(self, ids: Sequence[int]) -> None:
        if self.readers and any(int(i) in self.pos for i in ids):
            # a search is reading these arrays in a worker thread: copy before writing
            self.ids = self.ids.copy()
            self.rows = self.rows.copy()
        for chunk_id in ids:
            at = self.pos.pop(int(chunk_id), None)
            if at is None:
                continue
            last = self.size - 1
            if at != last:  # swap the last row into the hole
                moved = int(self.ids[last])
                self.ids[at] = moved
                self.rows[at] = self.rows[last]
                self.pos[moved] = at
            self.size -= 1

    def snapshot(self, restrict: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(rows, ids) to search, taken on the event loop so a worker never sees a half-done write."""
        if restrict is not None:
            pos = self.pos
            where = np.fromiter((pos[i] for i in restrict if i in pos), dtype=np.int64)
            return self.rows[where], self.ids[where]
        n = self.size
        return self.rows[:n], self.ids[:n].copy()

    def search(self, query: np.ndarray, k: int, restrict: Sequence[int] | None = None) -> list[tuple[int, float]]:
        rows, ids = self.snapshot(restrict)
        return top_k(rows, ids, query, k)

    def search_floor(self, query: np.ndarray, k: int, restrict: Sequence[int] | None = None) -> tuple[list[tuple[int, float]], float]:
        rows, ids = self.snapshot(restrict)
        return top_k_floor(rows, ids, query, k)


def top_k(rows: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Exact top-k by dot product (cosine on normalised rows), best first."""
    return top_k_floor(rows, ids, query, k)[0]


def top_k_floor(rows: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int) -> tuple[list[tuple[int, float]], float]:
    """``top_k`` plus the lowest similarity of all rows searched (hybrid fusion normalises by it)."""
    if rows.shape[0] == 0:
        return [], 0.0
    scores = similarities(rows, query)
    return _best(scores, ids, k), float(scores.min())


def similarities(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``rows @ query`` on one thread, without BLAS: NumPy's matrix product hands a product this size to
    OpenBLAS's thread pool, whose workers then spin for about 0.1 s waiting for more work — 107 ms of a core
    burnt after a 1.5 ms product (20k × 384, this 2-core machine). With ten users' servers searching on one
    hub that spinning took the cores the searches needed (10-user p95 ≈ 1 s). ``einsum``'s own loop runs on
    the calling thread only (releasing the GIL), at 10 ms for 100k × 384 against BLAS's 12 on one thread."""
    return np.einsum("ij,j->i", rows, query)


def _best(scores: np.ndarray, ids: np.ndarray, k: int) -> list[tuple[int, float]]:
    k = min(k, scores.size)
    top = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(int(ids[i]), float(scores[i])) for i in top]


class VectorIndex:
    """Per-space matrices; ``search`` returns (chunk id, cosine similarity), best first."""

    def __init__(self, repo: "ChunkRepository", *, max_rows: int = 2_000_000) -> None:
        self.repo = repo
        self.max_rows = max_rows
        self._spaces: dict[str, _Matrix] = {}
        self._stamp: dict[str, tuple[int, int]] = {}
        self._data_version: int | None = None
        self._marks: dict[str, str] = {}  # shared stores: the snapshot xmin each space was followed to
        self._lock = asyncio.Lock()
        self.loads = 0  # how many times a space was (re)loaded from the store
        self._ann_tasks: dict[str, asyncio.Task[bool]] = {}  # approximate indexes being built (shared library)

    def cached(self, space: "Space") -> bool:
        return space.name in self._spaces

    async def _data_changed_elsewhere(self) -> bool:
        version = await self.repo.data_version()
        changed = self._data_version is not None and version != self._data_version
        self._data_version = version
        return changed

    async def _stamp_of(self, space: "Space") -> tuple[int, int]:
        return await self.repo.vector_stamp(space)

    async def ensure(self, space: "Space") -> bool:
        """Load (or reload after an outside write) the space; False when it is too large to cache."""
        if hasattr(self.repo, "changes_since"):
            return await self._follow(space)
        async with self._lock:
            changed = await self._data_changed_elsewhere()
            if space.name in self._spaces and not changed:
                return True
            stamp = await self._stamp_of(space)
            if space.name in self._spaces and self._stamp.get(space.name) == stamp:
                return True
            if stamp[0] > self.max_rows:
                self._spaces.pop(space.name, None)
                return False
            ids, rows = await self.repo.load_vectors(space)
            self._spaces[space.name] = _Matrix.build(space.dim, ids, rows)
            self._stamp[space.name] = stamp
            self.loads += 1
            return True

    async def _follow(self, space: "Space") -> bool:
        """A shared store (PostgreSQL) that many users write: load once, then apply only what other
        transactions wrote or removed since the last look (``changes_since``), never a full reload."""
        async with self._lock:
            matrix = self._spaces.get(space.name)
            if matrix is None:
                mark = await self.repo.vector_mark()  # type: ignore[attr-defined]
                if (await self.repo.vector_stamp(space))[0] > self.max_rows:
                    return False
                ids, rows = await self.repo.load_vectors(space)
                matrix = self._spaces[space.name] = _Matrix.build(space.dim, ids, rows)
                matrix.pos  # noqa: B018 - every later search adds others' vectors: map ids now, not in one of them
                self._marks[space.name] = mark
                self.loads += 1
                return True
            self._apply(space, matrix, *await self.repo.changes_since(space, self._marks[space.name]))  # type: ignore[attr-defined]
            return True

    def _apply(self, space: "Space", matrix: _Matrix, ids: np.ndarray, rows: np.ndarray, removed: list[int],
               mark: str) -> None:
        """What ``changes_since`` returned, into the matrix; the next look starts from ``mark``."""
        if removed:
            matrix.remove(removed)
        if len(ids):
            matrix.add(ids.tolist(), rows)
        self._marks[space.name] = mark

    async def _search_while_following(self, space: "Space", query: np.ndarray,
                                      k: int) -> tuple[list[tuple[int, float]], float] | None:
        """A shared store's search over a loaded matrix: the product over the rows held runs in a worker while
        the other users' changes since the last look are fetched (a round trip to a database that their adds
        keep busy); then the rows those changes replaced or removed are left out and the new rows scored apart.
        The same dot products, top k and floor as following first and multiplying after, in the time of the
        longer of the two instead of their sum (10 users adding: following p50 30-40 ms, p95 90-140, every
        search). ``None``: no loaded matrix large enough for a worker (``ensure`` and the plain path then)."""
        async with self._lock:
            matrix = self._spaces.get(space.name)
            if matrix is None or matrix.size * matrix.dim < INLINE_MAX:
                return None
            rows, ids = matrix.snapshot()
            matrix.readers += 1

            def release(_: object) -> None:
                matrix.readers -= 1

            # never cancelled (a cancelled search leaves it to finish): ``readers`` drops when the worker is done
            product = asyncio.ensure_future(asyncio.to_thread(similarities, rows, query))
            product.add_done_callback(release)
            new_ids, new_rows, removed, mark = await self.repo.changes_since(space, self._marks[space.name])  # type: ignore[attr-defined]
            gone = [int(i) for i in removed] + new_ids.tolist()  # rows left out of the product's result
            pos = matrix.pos
            if any(i in pos for i in gone):
                await asyncio.shield(product)  # rows are about to move: the worker finishes first (no copy)
            self._apply(space, matrix, new_ids, new_rows, removed, mark)
        scores = await asyncio.shield(product)
        if gone:
            keep = ~np.isin(ids, np.asarray(gone, dtype=np.int64))
            scores, ids = scores[keep], ids[keep]
        if len(new_ids):
            keys, fresh = _last_rows(new_ids.tolist(), new_rows)  # as ``add`` stored them
            scores = np.concatenate([scores, similarities(np.asarray(fresh, dtype=np.float32), query)])
            ids = np.concatenate([ids, np.asarray(keys, dtype=np.int64)])
        if scores.size == 0:
            return [], 0.0
        return _best(scores, ids, k), float(scores.min())

    def _start_ann_index(self, space: "Space") -> None:
        """A shared library's approximate index for a space too large for memory (``ensure_ann_index``: pgvector's
        HNSW, built concurrently), once per space and process; none elsewhere."""
        build = getattr(self.repo, "ensure_ann_index", None)
        task = self._ann_tasks.get(space.name)
        if build is None or (task is not None and (not task.done() or task.result())):
            return

        async def run() -> bool:
            try:
                return bool(await build(space))
            except Exception:  # noqa: BLE001 - the searches stay exact meanwhile; the next one tries again
                logging.getLogger(__name__).warning("building the approximate vector index failed", exc_info=True)
                return False

        self._ann_tasks[space.name] = asyncio.get_running_loop().create_task(run(), name="astro-ann-index")

    async def aclose(self) -> None:
        """Stop an index build this process started (PostgreSQL leaves the unfinished index invalid; the next
        build drops it first)."""
        tasks, self._ann_tasks = list(self._ann_tasks.values()), {}
        for task in tasks:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def add(self, space: "Space", ids: Sequence[int], rows: np.ndarray) -> None:
        matrix = self._spaces.get(space.name)
        if matrix is not None:
            matrix.add(ids, rows)
            self._stamp[space.name] = (matrix.size, max(self._stamp.get(space.name, (0, 0))[1], max(ids, default=0)))

    def remove(self, ids: Sequence[int]) -> None:
        for name, matrix in self._spaces.items():
            matrix.remove(ids)
            self._stamp[name] = (matrix.size, self._stamp.get(name, (0, 0))[1])

    async def search(
        self, space: "Space", query: np.ndarray, k: int, *, restrict: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        return (await self.search_floor(space, query, k, restrict=restrict))[0]

    async def search_floor(
        self, space: "Space", query: np.ndarray, k: int, *, restrict: Sequence[int] | None = None
    ) -> tuple[list[tuple[int, float]], float]:
        """Best k (chunk id, cosine) and the lowest cosine over every row searched (for the
        sqlite-vec path, over the k returned)."""
        query = np.asarray(query, dtype=np.float32).reshape(-1)
        if restrict is None and hasattr(self.repo, "changes_since"):
            found = await self._search_while_following(space, query, k)
            if found is not None:
                return found
        if await self.ensure(space):
            matrix = self._spaces[space.name]
            if matrix.size * matrix.dim < INLINE_MAX:
                return matrix.search_floor(query, k, restrict)
            # a large product (≈ 10 ms at 100k × 384) runs in a worker: NumPy releases the GIL,
            # the server's event loop keeps streaming meanwhile
            rows, ids = matrix.snapshot(restrict)
            matrix.readers += 1
            try:
                return await asyncio.to_thread(top_k_floor, rows, ids, query, k)
            finally:
                matrix.readers -= 1
        # too large to hold in memory: sqlite-vec exact scan, or pgvector (HNSW once its index is built: that is
        # started here, in the background, not in this search's time) (distance = 1 - cosine)
        self._start_ann_index(space)
        found = [(i, 1.0 - d) for i, d in await self.repo.knn(space, query, k, restrict=restrict)]
        return found, min((s for _, s in found), default=0.0)
