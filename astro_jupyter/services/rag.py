"""Hybrid retrieval over the library's chunks, and an answer that cites them.

Two rankings of body chunks (references are never retrieved): exact kNN on embeddings
(``VectorIndex``, sqlite-vec underneath) and FTS5 BM25 on the words. They are fused with
reciprocal-rank fusion, score = Σ 1/(60 + rank), which needs no score calibration between
cosine and BM25. With an LLM the top passages go into a prompt asking for an answer citing
them as [n]; the tool maps each n back to paper, section and pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal, Sequence

import numpy as np

from .embed import STOPWORDS, EmbeddingBackend

if TYPE_CHECKING:
    from ..config import AstroConfig
    from ..store.chunks import ChunkRepository, ChunkRow, Space
    from .vector_index import VectorIndex

RRF_K = 60
Mode = Literal["hybrid", "vector", "fts"]
EmbedProgress = Callable[[int, int], Awaitable[None]]
_FTS_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def fts_query(text: str, *, max_terms: int = 32) -> str:
    """User text → a safe FTS5 expression: each word quoted, OR-ed (BM25 ranks the overlap).

    Quotes, operators (AND/OR/NOT/NEAR), column filters, ``*`` and parentheses in the input
    become plain words or vanish, so no query string can raise an FTS5 syntax error.
    """
    words = [w for w in _FTS_TOKEN.findall(text or "")]
    content = [w for w in words if w.lower() not in STOPWORDS and (len(w) > 1 or w.isdigit())] or words
    seen: list[str] = []
    for word in content:
        if word.lower() not in (s.lower() for s in seen):
            seen.append(word)
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in seen[:max_terms])


def rrf(rankings: Sequence[Sequence[int]], *, k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion of several best-first id lists."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


@dataclass
class Hit:
    chunk: "ChunkRow"
    score: float
    vector_rank: int | None = None
    fts_rank: int | None = None

    def label(self) -> str:
        parts = [self.chunk.title or self.chunk.paper_id]
        if self.chunk.section:
            parts.append(self.chunk.section)
        if self.chunk.pages:
            parts.append(self.chunk.pages)
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        c = self.chunk
        return {
            "chunk_id": c.id,
            "paper_id": c.paper_id,
            "title": c.title,
            "section": c.section,
            "page_start": c.page_start,
            "page_end": c.page_end,
            "score": round(self.score, 6),
            "vector_rank": self.vector_rank,
            "fts_rank": self.fts_rank,
            "text": c.text,
        }


@dataclass
class RagAnswer:
    query: str
    hits: list[Hit]
    answer: str = ""
    cited: list[int] = field(default_factory=list)  # 1-based indexes into hits
    llm_error: str = ""
    vector_error: str = ""  # set when only full-text search could run
    reembed: dict[str, Any] = field(default_factory=dict)  # a background re-embedding under way


class RagService:
    def __init__(
        self,
        config: "AstroConfig",
        repo: "ChunkRepository",
        index: "VectorIndex",
        embedder: EmbeddingBackend,
        llm: Any = None,
    ) -> None:
        self.config = config
        self.repo = repo
        self.index = index
        self.embedder = embedder
        self.llm = llm
        self._space: "Space | None" = None
        self._sync_lock = asyncio.Lock()
        self._synced_at: int | None = None  # PRAGMA data_version when every chunk last had a vector
        self.last_vector_error = ""
        self._reembed_task: asyncio.Task[None] | None = None
        self.reembed_status: dict[str, Any] = {}

    # -- embedding ----------------------------------------------------------------------
    @staticmethod
    def passage_text(chunk: "ChunkRow") -> str:
        """What gets embedded: the section name gives a chunk its topic."""
        return f"{chunk.section}\n{chunk.text}" if chunk.section else chunk.text

    async def space(self, sample: np.ndarray | None = None) -> "Space":
        if self._space is None:
            resolve = getattr(self.embedder, "resolve", None)
            if resolve is not None:  # ``auto``: the backend is decided (endpoint asked) on first use
                await resolve()
            if sample is None:
                sample = await self.embedder.embed(["dimension probe"])
            self._space = await self.repo.ensure_space(self.embedder.name, int(sample.shape[1]))
        return self._space

    async def embed_chunks(
        self, chunks: Sequence["ChunkRow"], *, batch: int = 32, progress: "EmbedProgress | None" = None
    ) -> int:
        """Embed and store vectors for these chunks (references are skipped); returns how many.
        Batches are stored as they finish, so an interrupted run keeps what it did."""
        chunks = [c for c in chunks if c.part != "references"]
        done = 0
        for start in range(0, len(chunks), batch):
            part = chunks[start : start + batch]
            matrix = await self.embedder.embed([self.passage_text(c) for c in part])
            space = await self.space(matrix)
            ids = [c.id for c in part]
            await self.repo.put_vectors(space, ids, matrix)
            self.index.add(space, ids, matrix)
            done += len(part)
            if progress is not None:
                await progress(done, len(chunks))
        return done

    async def sync(self, paper_ids: Sequence[str] | None = None) -> int:
        """Embed chunks that have no vector in the active space (new backend, failed embedding).

        A few (``embed_inline_max``) are embedded before the search answers; more — a changed
        backend, a large library — go to a background job (``reembed``) while searches go on:
        the chunks not embedded yet are still found by full-text search. The full check runs
        once per process and again only after another connection wrote (``PRAGMA data_version``)
        or an embedding failed: this process's own parses embed their chunks as they store them.
        """
        async with self._sync_lock:
            version = await self.repo.db.fetchval("PRAGMA data_version")
            if self._synced_at is not None and version == self._synced_at:
                return 0
            if self.reembed_running:
                return 0
            space = await self.space()
            missing = await self.repo.missing_vectors(space)
            if len(missing) > max(0, self.config.embed_inline_max):
                self.start_reembed(missing)
                return 0
            done = await self.embed_chunks(missing) if missing else 0
            self._synced_at = version
            return done

    @property
    def reembed_running(self) -> bool:
        return self._reembed_task is not None and not self._reembed_task.done()

    def start_reembed(self, missing: Sequence["ChunkRow"]) -> None:
        """Embed ``missing`` in the background (one job at a time); progress in ``reembed_status``."""
        if self.reembed_running:
            return
        status = {"backend": self.embedder.name, "done": 0, "total": len(missing), "state": "running", "error": ""}
        self.reembed_status = status

        async def progress(done: int, total: int) -> None:
            status["done"] = done

        async def run() -> None:
            try:
                await self.embed_chunks(missing, progress=progress)
                status["state"] = "done"
            except asyncio.CancelledError:
                status["state"] = "cancelled"
                raise
            except Exception as exc:  # noqa: BLE001 - reported in search results and doctor; retried next search
                status.update(state="failed", error=f"{type(exc).__name__}: {exc}")
            finally:
                self._synced_at = None  # the next search checks again (new chunks, a failed batch)

        self._reembed_task = asyncio.get_running_loop().create_task(run(), name="astro-reembed")

    async def wait_reembed(self) -> None:
        if self._reembed_task is not None:
            await asyncio.shield(self._reembed_task)

    async def aclose(self) -> None:
        """Stop a background re-embedding (what it stored stays; the rest is done next time)."""
        task, self._reembed_task = self._reembed_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def mark_unsynced(self) -> None:
        """Some chunks were stored without vectors (the embedding backend failed)."""
        self._synced_at = None

    def forget(self, chunk_ids: Sequence[int]) -> None:
        self.index.remove(chunk_ids)

    # -- retrieval ------------------------------------------------------------------------
    async def search(
        self, query: str, k: int = 8, *, paper_ids: Sequence[str] | None = None, mode: Mode = "hybrid", pool: int = 50
    ) -> list[Hit]:
        pool = max(pool, k * 4)
        restrict: list[int] | None = None
        if paper_ids:
            restrict = await self.repo.ids_for_papers(paper_ids)
            if not restrict:
                return []
        vector_ids: list[int] = []
        fts_ids: list[int] = []
        self.last_vector_error = ""
        if mode in ("hybrid", "vector"):
            try:
                await self.sync(paper_ids)
                qvec = (await self.embedder.embed([query]))[0]
                space = await self.space()
                vector_ids = [i for i, _ in await self.index.search(space, qvec, pool, restrict=restrict)]
            except Exception as exc:  # noqa: BLE001 - an embedding endpoint down must not stop full-text search
                if mode == "vector":
                    raise
                self.last_vector_error = f"{type(exc).__name__}: {exc}"
                self.mark_unsynced()
        if mode in ("hybrid", "fts"):
            match = fts_query(query)
            if match:
                fts_ids = [i for i, _ in await self.repo.fts(match, pool, paper_ids=paper_ids)]
        fused = rrf([r for r in (vector_ids, fts_ids) if r])[:k]
        rows = await self.repo.get_many([i for i, _ in fused])
        vrank = {i: n for n, i in enumerate(vector_ids, 1)}
        frank = {i: n for n, i in enumerate(fts_ids, 1)}
        return [Hit(rows[i], s, vrank.get(i), frank.get(i)) for i, s in fused if i in rows]

    # -- answering --------------------------------------------------------------------------
    @staticmethod
    def prompt(query: str, hits: Sequence[Hit]) -> list[dict[str, str]]:
        sources = "\n\n".join(f"[{n}] ({h.label()})\n{h.chunk.text}" for n, h in enumerate(hits, 1))
        system = (
            "You answer questions about research papers using only the numbered passages given. "
            "Cite every claim with the passage number in square brackets, e.g. [1] or [2][3]. "
            "If the passages do not contain the answer, say so."
        )
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": f"Passages:\n\n{sources}\n\nQuestion: {query}"},
        ]

    async def answer(self, query: str, k: int = 8, *, paper_ids: Sequence[str] | None = None) -> RagAnswer:
        hits = await self.search(query, k, paper_ids=paper_ids)
        result = RagAnswer(query, hits, vector_error=self.last_vector_error)
        if self.reembed_running:
            result.reembed = dict(self.reembed_status)
        if not hits or self.llm is None or not getattr(self.llm, "configured", False):
            return result
        try:
            text = await self.llm.complete(self.prompt(query, hits))
        except Exception as exc:  # noqa: BLE001 - the passages are still worth returning
            result.llm_error = str(exc)
            return result
        result.answer = text.strip()
        cited = sorted({int(n) for group in re.findall(r"\[([\d,;\s]+)\]", text) for n in re.findall(r"\d{1,3}", group)})
        result.cited = [n for n in cited if 1 <= n <= len(hits)]
        return result
