"""Hybrid retrieval over the library's chunks, and an answer that cites them.

Two rankings of body chunks (references are never retrieved): exact kNN on embeddings
(``VectorIndex``, sqlite-vec underneath) and FTS5 BM25 on the words. They are fused by a convex
combination of normalised scores (``fuse``; weight ``RagTuning.vector_weight``), which kept hybrid
above both of its parts on the labelled set where reciprocal-rank fusion did not
(benchmarks/bench_retrieval_labelled.py). With an LLM the top passages go into a prompt asking for an answer citing
them as [n]; the tool maps each n back to paper, section and pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal, Sequence

import numpy as np

from ..errors import ServiceTimeoutError
from .embed import STOPWORDS, EmbeddingBackend, embed_query

if TYPE_CHECKING:
    from ..config import AstroConfig
    from ..store.chunks import ChunkRepository, ChunkRow, Space
    from .vector_index import VectorIndex

Mode = Literal["hybrid", "vector", "fts"]
EmbedProgress = Callable[[int, int], Awaitable[None]]
_FTS_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
# what an embedding should not spend its tokens on: heading numbers ("4.1", "A.2", "III.") and
# ruled lines (manuals separate function signatures with runs of underscores or dashes)
_HEADING_NUMBER = re.compile(r"^(?:[A-Z](?:\.\d+)+\.?|[IVX]+\.|\d{1,2}(?:\.\d{1,2})*\.?)\s+(?=\S)")
_RULE = re.compile(r"[_=~*-]{4,}")


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


# Below these cosines the best passage shares little meaning with the question (all-MiniLM-L6-v2 on
# the demo papers: related questions 0.5-0.7, unrelated ones 0.06-0.27). A hashed bag of words
# (lexical-v2) cannot tell, so there the share of the question's words the passage holds decides.
WEAK_COSINE = 0.35
WEAK_WORD_SHARE = 0.5


def query_words(text: str) -> list[str]:
    """The question's content words, lower-cased, once each (what ``fts_query`` searches for)."""
    words = [w.lower() for w in _FTS_TOKEN.findall(text or "")]
    content = [w for w in words if w not in STOPWORDS and (len(w) > 1 or w.isdigit())] or words
    return list(dict.fromkeys(content))


def word_share(query: str, passage: str) -> tuple[int, int]:
    """(question words found in the passage, question words); a word counts by its first six
    letters, a rough stem ("encoding" finds "encoded"), as FTS5's porter stemmer would."""
    words = query_words(query)
    lower = passage.lower()
    return sum(1 for w in words if w[:6] in lower), len(words)


def fuse(
    vector: Sequence[tuple[int, float]], floor: float, fts: Sequence[tuple[int, float]], weight: float
) -> list[tuple[int, float]]:
    """Convex combination of normalised scores, best first: cosine scaled to [0, 1] between the
    lowest similarity in the collection and the best hit; BM25 (FTS5 gives it negated) divided by
    the best match's. A passage one side does not return scores 0 there. Unlike reciprocal-rank
    fusion this keeps how far ahead a hit is: a passage that only BM25 finds, far ahead of the
    rest, is not overtaken by passages that both rankings place in the middle (on the labelled set,
    RRF fell below BM25 alone on both backends; this does not)."""
    top = max((sc for _, sc in vector), default=floor)
    span = (top - floor) or 1.0
    best_bm25 = max((-sc for _, sc in fts), default=0.0) or 1.0
    scores: dict[int, float] = {}
    for i, sc in vector:
        scores[i] = weight * (sc - floor) / span
    for i, sc in fts:
        scores[i] = scores.get(i, 0.0) + (1.0 - weight) * max(0.0, -sc) / best_bm25
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


class _OutOfTime(ServiceTimeoutError):
    """The answer's time budget ran out; carries what was found so far."""

    def __init__(self, result: "RagAnswer") -> None:
        super().__init__("out of time")
        self.result = result


@dataclass
class Hit:
    """One retrieved passage. ``score`` only orders hits within one search (the fused score is
    relative: the best hit of any search gets the top of the scale, relevant or not), so what is
    shown is absolute: the cosine ``similarity`` to the question and the raw ``bm25``."""

    chunk: "ChunkRow"
    score: float
    vector_rank: int | None = None
    fts_rank: int | None = None
    relevance: float | None = None  # the re-ranking call's 0-10 score
    quote: str = ""  # the sentence it quoted from this passage (checked to be in it)
    similarity: float | None = None  # cosine between question and passage embeddings
    bm25: float | None = None  # FTS5 BM25, higher is better (None: no word matched)

    def evidence(self) -> str:
        """How well this passage matches, in absolute terms ("cosine 0.41, BM25 7.2")."""
        if self.relevance is not None:
            return f"relevance {self.relevance:g}/10"
        parts = []
        if self.similarity is not None:
            parts.append(f"cosine {self.similarity:.2f}")
        parts.append(f"BM25 {self.bm25:.1f}" if self.bm25 is not None else "no word match")
        return ", ".join(parts)

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
            "rank_score": round(self.score, 6),
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "bm25": None if self.bm25 is None else round(self.bm25, 3),
            "vector_rank": self.vector_rank,
            "fts_rank": self.fts_rank,
            "relevance": self.relevance,
            "quote": self.quote,
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
    rerank: dict[str, Any] = field(default_factory=dict)  # the re-ranking call: model, latency, usage, cost, kept
    answer_call: dict[str, Any] = field(default_factory=dict)  # the answering call: model, latency, usage, cost
    citation_check: dict[str, Any] = field(default_factory=dict)  # invalid [n] found and what was done
    refused: bool = False  # no passage was relevant enough to answer from
    weak: str = ""  # why even the best passage looks unrelated to the question ("" = it does not)


@dataclass(frozen=True)
class RagTuning:
    """Retrieval tuning (not settings; benchmarks and tests pass their own to ``RagService``)."""

    rerank: bool = True  # with an LLM, re-rank the top hybrid passages in one batched scoring call
    rerank_pool: int = 24  # hybrid passages sent to that call
    rerank_threshold: float = 5.0  # relevance (0-10) a passage needs to be used as evidence
    rerank_passage_chars: int = 900  # characters of each passage the call sees
    embed_inline_max: int = 64  # chunks without a vector a search embeds first; more go to a background job
    vector_weight: float = -1.0  # vector share in hybrid ranking, 0-1; negative: by backend (0.5, lexical below)
    lexical_weight: float = 0.3  # the vector share when the embedding is lexical-v2 (mostly BM25 again)


class RagService:
    def __init__(
        self,
        config: "AstroConfig",
        repo: "ChunkRepository",
        index: "VectorIndex",
        embedder: EmbeddingBackend,
        llm: Any = None,
        *,
        tuning: RagTuning | None = None,
    ) -> None:
        self.config = config
        self.tuning = tuning or RagTuning()
        self.repo = repo
        self.index = index
        self.embedder = embedder
        self.llm = llm
        self._space: "Space | None" = None
        self._sync_lock = asyncio.Lock()
        self._synced_at: int | None = None  # PRAGMA data_version when every chunk last had a vector
        self._checked_at = 0.0  # time.monotonic() of the last look for chunks without a vector
        self.last_vector_error = ""
        self._reembed_task: asyncio.Task[None] | None = None
        self._recheck_task: asyncio.Task[int] | None = None  # a shared library's periodic look, beside the searches
        self.reembed_status: dict[str, Any] = {}

    # -- embedding ----------------------------------------------------------------------
    @staticmethod
    def passage_text(chunk: "ChunkRow", *, words: bool = True) -> str:
        """What gets embedded: the section path first (it gives a chunk its topic, and a windowed
        local model repeats the first line in every window), then the text without ruled lines.
        ``words``: the path as words ("Methodology: Overview") for a sentence model, to which
        heading numbers mean nothing; the hashed ``lexical-v2`` keeps them as tokens ("4.1"),
        which a question naming the section can match (on the labelled set its hybrid MRR fell
        below BM25 alone without them, while MiniLM's vector ranking gained with the words)."""
        from .parse.chunking import PATH_SEP

        text = _RULE.sub(" ", chunk.text)
        if not chunk.section:
            return text
        path = chunk.section
        if words:
            path = ": ".join(_HEADING_NUMBER.sub("", part).strip() for part in chunk.section.split(PATH_SEP))
        return f"{path}\n{text}"

    async def passage_texts(self, chunks: Sequence["ChunkRow"]) -> list[str]:
        """``passage_text`` for the active backend (decided first when it is ``auto``)."""
        resolve = getattr(self.embedder, "resolve", None)
        if resolve is not None:
            await resolve()
        words = self.embedder.name != "lexical-v2"
        return [self.passage_text(c, words=words) for c in chunks]

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
            matrix = await self.embedder.embed(await self.passage_texts(part))
            space = await self.space(matrix)
            ids = [c.id for c in part]
            await self.repo.put_vectors(space, ids, matrix)
            self.index.add(space, ids, matrix)
            done += len(part)
            if progress is not None:
                await progress(done, len(chunks))
        return done

    async def store_vectors(self, chunks: Sequence["ChunkRow"], matrix: np.ndarray) -> int:
        """Store vectors made elsewhere (a bulk-ingest worker, with this backend) for these chunks'
        non-reference passages, in order; returns how many."""
        chunks = [c for c in chunks if c.part != "references"]
        if len(chunks) != len(matrix):
            raise ValueError(f"{len(matrix)} vectors for {len(chunks)} passages: the chunks do not match")
        if not chunks:
            return 0
        space = await self.space(matrix)
        ids = [c.id for c in chunks]
        await self.repo.put_vectors(space, ids, matrix)
        self.index.add(space, ids, matrix)
        return len(ids)

    async def sync(self, paper_ids: Sequence[str] | None = None, *, wait: bool = True) -> int:
        """Embed chunks that have no vector in the active space (new backend, failed embedding).

        A few (``embed_inline_max``) are embedded before the search answers; more — a changed
        backend, a large library — go to a background job (``reembed``) while searches go on:
        the chunks not embedded yet are still found by full-text search. The full check runs
        once per process and again only after another connection wrote (``PRAGMA data_version``)
        or an embedding failed: this process's own parses embed their chunks as they store them.
        ``wait=False`` (a search): on a shared library, the periodic look after a clean one runs in
        the background instead of before the answer (see below).
        """
        recheck = getattr(self.repo, "missing_check_secs", None)
        if (not wait and recheck is not None and self._synced_at is not None
                and time.monotonic() - self._checked_at < recheck):
            # a search on a shared library between two periodic looks: nothing to ask the database (its data
            # version was a round trip in every search, 10–40 ms under load) and no lock to wait on (the
            # background look holds it for its anti-join)
            return 0
        async with self._sync_lock:
            version = await self.repo.data_version()
            if self._synced_at is not None and version == self._synced_at:
                return 0
            # a shared library changes with every other user's write, and their parses store their own
            # vectors: after a clean check, look again only every ``missing_check_secs`` (none for SQLite),
            # and not in a search's time — an anti-join over every chunk of the library (160–280 ms inside
            # PostgreSQL at 86k chunks, load 13) that seldom finds anything; what it finds is found by full
            # text meanwhile
            if self._synced_at is not None and recheck is not None:
                if time.monotonic() - self._checked_at < recheck:
                    return 0
                if not wait:
                    self._start_recheck()
                    return 0
            if self.reembed_running:
                return 0
            self._checked_at = time.monotonic()
            space = await self.space()
            missing = await self.repo.missing_vectors(space)
            if len(missing) > max(0, self.tuning.embed_inline_max):
                self.start_reembed(missing)
                return 0
            done = await self.embed_chunks(missing) if missing else 0
            self._synced_at = version
            return done

    def _start_recheck(self) -> None:
        if self._recheck_task is not None and not self._recheck_task.done():
            return

        async def run() -> int:
            try:
                return await self.sync()
            except Exception:  # noqa: BLE001 - the next search after the interval tries again
                logging.getLogger(__name__).warning("looking for chunks without a vector failed", exc_info=True)
                return 0

        self._recheck_task = asyncio.get_running_loop().create_task(run(), name="astro-vector-recheck")

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
        """Stop a background re-embedding, look for missing vectors or vector index build (what it stored
        stays; the rest is done next time)."""
        for name in ("_recheck_task", "_reembed_task"):
            task = getattr(self, name)
            setattr(self, name, None)
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        close_index = getattr(self.index, "aclose", None)
        if close_index is not None:
            await close_index()

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
        self.last_vector_error = ""
        match = fts_query(query) if mode in ("hybrid", "fts") else ""
        # the full-text ranking runs beside the vector one (a query in the database while this process embeds
        # the question, follows the other users' vectors and multiplies): one after the other, a search waited
        # for the sum of both, each stretched by every other process on a busy hub's cores
        lexical = asyncio.ensure_future(self.repo.fts(match, pool, paper_ids=paper_ids)) if match else None
        try:
            vector, floor = await self._vector_ranking(query, pool, paper_ids, restrict, mode)
            fts: list[tuple[int, float]] = await lexical if lexical is not None else []
        finally:
            if lexical is not None and not lexical.done():  # the vector side failed (mode "vector") or was cancelled
                lexical.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await lexical
        if vector and fts:
            fused = fuse(vector, floor, fts, self.vector_weight())[:k]
        else:
            fused = [(i, float(sc)) for i, sc in (vector or [(i, -sc) for i, sc in fts])][:k]
        rows = await self.repo.get_many([i for i, _ in fused])
        vrank = {i: n for n, (i, _) in enumerate(vector, 1)}
        frank = {i: n for n, (i, _) in enumerate(fts, 1)}
        cosine = dict(vector)
        bm25 = {i: -sc for i, sc in fts}  # FTS5 gives BM25 negated
        return [Hit(rows[i], sc, vrank.get(i), frank.get(i), similarity=cosine.get(i), bm25=bm25.get(i))
                for i, sc in fused if i in rows]

    async def _vector_ranking(self, query: str, pool: int, paper_ids: Sequence[str] | None,
                              restrict: list[int] | None, mode: Mode) -> tuple[list[tuple[int, float]], float]:
        """(best ``pool`` (chunk id, cosine), the lowest cosine searched); in hybrid mode a failure (an embedding
        endpoint down) leaves ([], 0.0) and ``last_vector_error``, so full-text search still answers."""
        if mode not in ("hybrid", "vector"):
            return [], 0.0
        try:
            qvec = await embed_query(self.embedder, query)  # first: a failing endpoint costs one request
            await self.sync(paper_ids, wait=False)
            space = await self.space()
            return await self.index.search_floor(space, qvec, pool, restrict=restrict)
        except Exception as exc:  # noqa: BLE001 - an embedding endpoint down must not stop full-text search
            if mode == "vector":
                raise
            self.last_vector_error = f"{type(exc).__name__}: {exc}"
            self.mark_unsynced()
            return [], 0.0

    def weak_match(self, query: str, hits: Sequence[Hit]) -> str:
        """Why the best of ``hits`` is probably not about the question, or "" when it may be.

        Fused scores cannot say (the best hit of any search tops the scale), so this looks at
        absolute evidence: a sentence embedding's cosine, else how many question words appear."""
        if not hits:
            return ""
        similarities = [h.similarity for h in hits if h.similarity is not None]
        if similarities and self.embedder.name != "lexical-v2":
            best = max(similarities)
            if best < WEAK_COSINE:
                return (f"the closest passage has cosine similarity {best:.2f} to the question "
                        f"(below {WEAK_COSINE:.2f}): the library may not hold what you ask about")
            return ""
        found, total = max(word_share(query, h.chunk.text) for h in hits)
        if total and found / total < WEAK_WORD_SHARE:
            return (f"the closest passage holds only {found} of the question's {total} words: "
                    "the library may not hold what you ask about")
        return ""

    def vector_weight(self) -> float:
        """The vector side's share in hybrid fusion: ``RagTuning.vector_weight``, or by backend — an equal
        say for a real embedding, less for ``lexical-v2``, a bag of words mostly redundant with BM25."""
        configured = self.tuning.vector_weight
        if 0.0 <= configured <= 1.0:
            return configured
        return self.tuning.lexical_weight if self.embedder.name == "lexical-v2" else 0.5

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

    async def _call(self, messages: list[dict[str, str]]) -> tuple[str, dict[str, Any]]:
        """One completion, with what it cost: (text, {model, latency_ms, usage, cost_usd})."""
        from ..llm.types import Completed
        from .evidence import cost_usd

        start = time.perf_counter()
        text, model, usage = "", "", {}
        stream = getattr(self.llm, "stream", None)
        if stream is None:
            text = await self.llm.complete(messages)
        else:
            async for item in stream(messages, None):
                if isinstance(item, Completed):
                    text, model, usage = item.text, item.model, dict(item.usage or {})
        meta = {"model": model, "latency_ms": round((time.perf_counter() - start) * 1000, 1), "usage": usage,
                "cost_usd": cost_usd(usage, model, self.config.llm_prices)}
        return text, meta

    async def rerank(self, query: str, hits: list[Hit], k: int, result: RagAnswer) -> list[Hit]:
        """Score every hit in one LLM call; returns the evidence (score ≥ threshold, best first, at most k).
        On a failed or unusable call the hybrid order stands (``result.rerank['error']`` says why)."""
        from .evidence import parse_judgements, rerank_prompt

        info: dict[str, Any] = {"passages": len(hits), "threshold": self.tuning.rerank_threshold}
        result.rerank = info
        try:
            text, call = await self._call(rerank_prompt(query, [(h.label(), h.chunk.text) for h in hits],
                                                        self.tuning.rerank_passage_chars))
            info.update(call)
            judged = parse_judgements(text, [h.chunk.text[: self.tuning.rerank_passage_chars + 200] for h in hits])
        except Exception as exc:  # noqa: BLE001 - ranked passages without re-ranking are still an answer
            info["error"] = f"{type(exc).__name__}: {exc}"[:300]
            return hits[:k]
        for n, hit in enumerate(hits, 1):
            j = judged.get(n)
            hit.relevance = j.score if j else 0.0
            hit.quote = j.quote if j else ""
        order = sorted(range(len(hits)), key=lambda i: (-(hits[i].relevance or 0.0), i))
        ranked = [hits[i] for i in order]
        evidence = [h for h in ranked if (h.relevance or 0.0) >= self.tuning.rerank_threshold][:k]
        info["kept"] = len(evidence)
        result.hits = evidence or ranked[:k]
        return evidence

    async def answer(self, query: str, k: int = 8, *, paper_ids: Sequence[str] | None = None,
                     budget_secs: float | None = None) -> RagAnswer:
        """Hybrid passages; with an LLM, re-ranked evidence and an answer whose every [n] is checked.

        ``budget_secs``: the LLM calls stop when it is spent and the passages found are the answer
        (a tool timeout would otherwise drop them and say only "timed out")."""
        deadline = None if budget_secs is None else asyncio.get_running_loop().time() + budget_secs
        try:
            return await self._answer(query, k, paper_ids, deadline)
        except _OutOfTime as out:
            result = out.result
            result.llm_error = f"no answer within the tool's time budget of {budget_secs:g} s; the passages found are listed"
            return result

    async def _within(self, deadline: float | None, result: RagAnswer, work: Awaitable[Any]) -> Any:
        if deadline is None:
            return await work
        try:
            async with asyncio.timeout_at(deadline):
                return await work
        except TimeoutError:
            raise _OutOfTime(result) from None

    async def _answer(self, query: str, k: int, paper_ids: Sequence[str] | None, deadline: float | None) -> RagAnswer:
        from .evidence import REFUSAL, check_citations

        llm_ready = self.llm is not None and getattr(self.llm, "configured", False)
        rerank = llm_ready and self.tuning.rerank
        hits = await self.search(query, max(k, self.tuning.rerank_pool) if rerank else k, paper_ids=paper_ids)
        result = RagAnswer(query, hits[:k], vector_error=self.last_vector_error)
        result.weak = self.weak_match(query, hits[:k])
        if self.reembed_running:
            result.reembed = dict(self.reembed_status)
        if not hits or not llm_ready:
            return result
        evidence = await self._within(deadline, result, self.rerank(query, hits, k, result)) if rerank else hits[:k]
        if not evidence:
            result.refused = True
            result.answer = (f"{REFUSAL}: no passage scored {self.tuning.rerank_threshold:g}/10 or more for relevance. "
                             "The closest passages are listed below.")
            return result
        result.hits = evidence
        try:
            text, call = await self._within(deadline, result, self._call(self.prompt(query, evidence)))
        except _OutOfTime:
            raise
        except Exception as exc:  # noqa: BLE001 - the passages are still worth returning
            result.llm_error = str(exc)
            return result
        result.answer_call = call
        check = check_citations(text, len(evidence))
        result.cited = check.cited
        if check.invalid:
            bad = ", ".join(f"[{n}]" for n in check.invalid)
            result.citation_check = {"invalid": check.invalid, "action": "refused" if check.refused else "corrected"}
            if check.refused:
                result.llm_error = (f"the answer cited {bad}, which is not among the {len(evidence)} evidence passages, "
                                    "and nothing it cited was; answer refused")
                return result
            result.answer = f"{check.text}\n\n(Removed citation {bad}: not among the evidence passages.)"
            return result
        result.answer = check.text
        return result
