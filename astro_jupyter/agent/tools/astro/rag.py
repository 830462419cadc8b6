"""``rag_search``: hybrid retrieval over the library, with a cited answer when an LLM is configured.

Thin: retrieval and answering live in ``services/rag.py``. Without an LLM the ranked passages
(paper, section, pages, score) are the result; with one, the answer cites them as [n] and
the result lists what each [n] is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....errors import AstroError
from ....services.embed import take_notice
from ..persist import MAX_OUTPUT_CHARS
from ..base import AgentTool, ProgressReporter, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ....config import AstroConfig

MAX_K = 20
ANSWER_SHARE = 0.8  # of tool_timeout_secs: searching and answering together, the rest is margin


class RagSearchTool(AgentTool):
    name = "rag_search"
    description = (
        "Search the parsed papers in the library (vector kNN + full-text BM25, fused; with an LLM, passages "
        "re-ranked by relevance) and answer with citations [n] to the passages (paper, section, pages); "
        "without an LLM, returns the ranked passages."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "A question or keywords."},
            "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "description": "Passages to use (default 6)."},
            "paper_ids": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Only these papers (library ids, arXiv ids, DOIs or bibcodes).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    is_readonly = True

    def classifier_summary(self) -> str:
        return "Search parsed papers and answer with cited passages (hybrid vector + full-text)."

    async def execute_with_progress(self, args: dict[str, Any], ctx: ToolContext, progress: ProgressReporter) -> ToolOutput:
        """The first search may download the local embedding model: its bytes are this call's progress."""
        embedder = ctx.services.rag.embedder
        if getattr(embedder, "backend", False) is None:  # an AutoEmbedder that has not decided yet

            def shown(done: int, total: int, name: str) -> Any:
                return progress(done, total, f"downloading the embedding model ({name})")

            embedder.progress = shown
            try:
                return await self.execute(args, ctx)
            finally:
                if embedder.progress is shown:
                    embedder.progress = None
        return await self.execute(args, ctx)

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        query = str(args.get("query") or "").strip()
        if not query:
            return ToolOutput.error("rag_search needs a non-empty 'query'.")
        k = max(1, min(MAX_K, int(args.get("k") or 6)))
        services = ctx.services
        paper_ids: list[str] | None = None
        try:
            if args.get("paper_ids"):
                paper_ids = [(await services.library.get(str(p))).id for p in args["paper_ids"]]
            unsearchable = await services.library.not_searchable()
            waiting = unsearchable.note()
            unsearchable_meta = {"unparsed": [p.id for p in unsearchable.unparsed],
                                 "unparsed_total": unsearchable.unparsed_total,
                                 "metadata_only": unsearchable.metadata_only}
            if await services.chunks.count() == 0:
                return ToolOutput(
                    "The library has no parsed papers yet: download_paper then parse_paper first."
                    + (f"\n{waiting}" if waiting else ""),
                    metadata={"query": query, "hits": [], "not_searchable": unsearchable_meta},
                )
            # the LLM part stops in time for the passages to be returned before the tool's own timeout
            budget = ctx.config.tool_timeout_secs * ANSWER_SHARE if ctx.config.tool_timeout_secs > 0 else None
            result = await services.rag.answer(query, k, paper_ids=paper_ids, budget_secs=budget)
        except AstroError as exc:
            return ToolOutput.error(f"rag_search failed: {exc}", reason=exc.reason)
        hits = result.hits
        # once per process: retrieval fell back to lexical-v2 (offline, download failed) or the model was downloaded
        notice = take_notice(services.rag.embedder)
        if not hits:
            scope = f" in {', '.join(paper_ids)}" if paper_ids else ""
            return ToolOutput(f"No passages{scope} match {query!r}." + (f"\n{waiting}" if waiting else "")
                              + (f"\n({notice})" if notice else ""),
                              metadata={"query": query, "hits": [], "not_searchable": unsearchable_meta,
                                        "embedding_notice": notice})
        sources = {n: {"paper_id": h.chunk.paper_id, "title": h.chunk.title, "section": h.chunk.section,
                       "page_start": h.chunk.page_start, "page_end": h.chunk.page_end, "chunk_id": h.chunk.id,
                       "relevance": h.relevance, "quote": h.quote}
                   for n, h in enumerate(hits, 1)}
        meta: dict[str, Any] = {
            "query": query,
            "hits": [h.to_dict() for h in hits],
            "answer": result.answer,
            "cited": result.cited,
            "sources": sources,
            "vector_error": result.vector_error,
            "rerank": result.rerank,
            "answer_call": result.answer_call,
            "citation_check": result.citation_check,
            "refused": result.refused,
            "weak": result.weak,
            "not_searchable": unsearchable_meta,
            "embedding_notice": notice,
        }
        note = f"\n(vector search unavailable, full-text only: {result.vector_error})" if result.vector_error else ""
        note += f"\n({notice})" if notice else ""
        if waiting:
            note += f"\n{waiting}"
        if result.reembed:
            r = result.reembed
            meta["reembed"] = r
            note += (f"\n(re-embedding the library for {r['backend']}: {r['done']}/{r['total']} chunks done; "
                     "passages not embedded yet are found by full-text search)")
        budget = max(1500, MAX_OUTPUT_CHARS - 400)
        if result.answer and not result.refused:
            lines = [result.answer, "", "Sources:"]
            if result.weak and not result.rerank.get("kept"):
                lines.insert(0, f"(Weak match: {result.weak}.)\n")
            for n in result.cited or range(1, len(hits) + 1):
                h = hits[n - 1]
                quote = f' — "{h.quote}"' if h.quote else ""
                lines.append(f"[{n}] {h.label()} ({h.chunk.paper_id}){quote}")
            return ToolOutput(_fit("\n".join(lines), budget - len(note)) + note, metadata=meta)
        head = f"Top {len(hits)} passages for {query!r}" + (f" (no answer: {result.llm_error})" if result.llm_error else "") + ":"
        if result.weak and not result.refused:
            head = f"Weak match: {result.weak}. The nearest passages, not an answer:\n" + head
        lines = [result.answer, "", head] if result.refused else [head]
        per = max(200, (budget - 200) // len(hits) - 120)
        for n, h in enumerate(hits, 1):
            text = h.chunk.text if len(h.chunk.text) <= per else h.chunk.text[:per].rsplit(" ", 1)[0] + " …"
            lines.append(f"\n[{n}] {h.label()} ({h.chunk.paper_id}; {h.evidence()})\n{text}")
        return ToolOutput(_fit("\n".join(lines), budget - len(note)) + note, metadata=meta)


def _fit(text: str, budget: int) -> str:
    return text if len(text) <= budget else text[: budget - 2].rstrip() + " …"


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [RagSearchTool()]
