"""search_papers: literature search across ADS + arXiv, merged into one list.

The tools stay thin: the clients (``services.ads``/``services.arxiv``) fetch, the library
(``services.library``) annotates hits with local status and resolves identifiers. Merging
lives here because it is about presenting one list to the model: ADS metadata wins (curated
journal, keywords, citation counts), the arXiv id and version are kept.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ....errors import AstroError
from ....services.ads import to_ads_query
from ....services.identifiers import paper_id_for
from ....services.library import local_status
from ....store.papers import PaperRecord
from ..base import AgentTool, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ....config import AstroConfig

SOURCES = ("ads", "arxiv")
MAX_ROWS = 50


def _authors_short(authors: list[str], limit: int = 3) -> str:
    if not authors:
        return "unknown authors"
    shown = "; ".join(authors[:limit])
    return shown + (" et al." if len(authors) > limit else "")


def _same_paper(a: PaperRecord, b: PaperRecord) -> bool:
    return bool(
        (a.arxiv_id and a.arxiv_id == b.arxiv_id)
        or (a.doi and b.doi and a.doi.lower() == b.doi.lower())
        or (a.bibcode and a.bibcode == b.bibcode)
    )


def merge_hits(ads_hits: list[PaperRecord], arxiv_hits: list[PaperRecord]) -> list[tuple[PaperRecord, list[str]]]:
    """Interleave the two ranked lists (ADS #1, arXiv #1, ADS #2, ...) so both sources' best
    hits survive truncation; a hit already present (same arXiv id / DOI / bibcode) is merged
    into it instead — ADS fields win, the arXiv version is kept."""
    merged: list[tuple[PaperRecord, list[str]]] = []
    ranked = [("ads", hit, rank) for rank, hit in enumerate(ads_hits)]
    ranked += [("arxiv", hit, rank) for rank, hit in enumerate(arxiv_hits)]
    ranked.sort(key=lambda item: (item[2], item[0] != "ads"))
    for source, hit, _ in ranked:
        match = next((pair for pair in merged if _same_paper(pair[0], hit)), None)
        if match is None:
            merged.append((hit, [source]))
            continue
        record, sources = match
        if source == "ads" and "ads" not in sources:
            hit.merge_from(record)  # ADS arrived second: it still wins, arXiv fills its gaps
            hit.arxiv_version = record.arxiv_version or hit.arxiv_version
            merged[merged.index(match)] = (hit, sources)
            record = hit
        else:
            record.merge_from(hit)
            if source == "arxiv" and hit.arxiv_version:
                record.arxiv_version = hit.arxiv_version
        if source not in sources:
            sources.append(source)
            sources.sort()
    return merged


def hit_dict(record: PaperRecord, sources: list[str], stored: PaperRecord | None) -> dict[str, Any]:
    return {
        "paper_id": stored.id if stored else paper_id_for(record.arxiv_id, record.doi, record.bibcode),
        "title": record.title,
        "authors": record.authors,
        "year": record.year,
        "journal": record.journal,
        "arxiv_id": record.arxiv_id,
        "arxiv_version": record.arxiv_version,
        "doi": record.doi,
        "bibcode": record.bibcode,
        "citation_count": record.citation_count,
        "abstract": record.abstract,
        "keywords": record.keywords,
        "url": record.url,
        "sources": sources,
        "in_library": stored is not None,
        "status": local_status(stored),
    }


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def hit_line(n: int, hit: dict[str, Any]) -> str:
    """Two short lines per hit: a page of results must stay under the tool-output limit."""
    paper_id = hit["paper_id"] or "?"
    year = f" ({hit['year']})" if hit["year"] else ""
    parts = [_clip(hit["journal"], 40) or "preprint"]
    if hit["arxiv_id"]:
        parts.append(f"arXiv {hit['arxiv_id']}{hit['arxiv_version'] or ''}")
    if hit["doi"] and not paper_id.startswith("doi:"):
        parts.append(f"doi:{hit['doi']}")
    parts.append(f"{hit['citation_count']} citations" if hit["citation_count"] is not None else "citations unknown")
    parts.append(hit["status"].replace("_", " "))
    return (
        f"{n}. [{paper_id}] {_clip(hit['title'] or '(untitled)', 140)}{year} — {_authors_short(hit['authors'], 2)}\n"
        f"   {' · '.join(parts)}"
    )


class SearchPapersTool(AgentTool):
    name = "search_papers"
    description = (
        "Search NASA ADS and arXiv together for papers, with citation counts and library status. "
        "Results are merged and de-duplicated; each says whether the paper is already in the local "
        "library (not downloaded / downloaded / parsed). Use the returned id with download_paper, parse_paper "
        "or get_paper_metadata. ADS query syntax works (author:\"Ivezić\", year:2019, title:\"LSST\")."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Search terms (ADS/arXiv syntax allowed)."},
            "rows": {"type": "integer", "minimum": 1, "maximum": MAX_ROWS, "description": "How many papers to return after merging (default 10)."},
            "sort": {
                "type": "string",
                "enum": ["relevance", "date", "citations"],
                "description": "Order (default relevance; arXiv has no citation sort and uses relevance).",
            },
            "sources": {
                "type": "array",
                "items": {"type": "string", "enum": list(SOURCES)},
                "description": "Which services to query (default both).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    is_readonly = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        query = str(args.get("query") or "").strip()
        if not query:
            return ToolOutput.error("search_papers needs a non-empty query")
        rows = max(1, min(int(args.get("rows") or 10), MAX_ROWS))
        sort = str(args.get("sort") or "relevance")
        wanted = [s for s in (args.get("sources") or SOURCES) if s in SOURCES] or list(SOURCES)
        services = ctx.services
        status: dict[str, dict[str, Any]] = {}
        jobs: dict[str, Any] = {}
        if "ads" in wanted:
            if services.ads.configured:
                jobs["ads"] = services.ads.search(to_ads_query(query), rows=rows, sort=sort)
            else:
                status["ads"] = {"ok": False, "error": "skipped: ADS_API_TOKEN is not set", "count": 0}
        if "arxiv" in wanted:
            arxiv_sort = "relevance" if sort == "citations" else sort
            jobs["arxiv"] = services.arxiv.search(query, max_results=rows, sort=arxiv_sort)
        outcomes = await asyncio.gather(*jobs.values(), return_exceptions=True)
        found: dict[str, list[PaperRecord]] = {"ads": [], "arxiv": []}
        for source, outcome in zip(jobs, outcomes):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, (AstroError, OSError)):
                    raise outcome
                status[source] = {"ok": False, "error": str(outcome), "count": 0}
            else:
                found[source] = outcome.records
                total = getattr(outcome, "num_found", None)
                status[source] = {
                    "ok": True,
                    "count": len(outcome.records),
                    "total": total if total is not None else outcome.total,
                }
        if not any(s.get("ok") for s in status.values()):
            problems = "; ".join(f"{name}: {s['error']}" for name, s in status.items())
            return ToolOutput.error(f"search_papers failed on every source — {problems}", sources=status, query=query)

        merged = merge_hits(found["ads"], found["arxiv"])
        stored = await services.library.annotate([record for record, _ in merged])
        hits = [hit_dict(record, sources, stored.get(id(record))) for record, sources in merged]
        if sort == "date":
            hits.sort(key=lambda h: -(h["year"] or 0))
        elif sort == "citations":
            hits.sort(key=lambda h: -(h["citation_count"] or 0))
        hits = hits[:rows]

        def describe(name: str, label: str) -> str:
            s = status.get(name)
            if s is None:
                return f"{label}: not queried"
            if s["ok"]:
                return f"{label}: {s['count']} of {s['total']}"
            return f"{label}: FAILED ({s['error']})"

        header = f'{len(hits)} papers for "{query}" ({describe("ads", "ADS")}; {describe("arxiv", "arXiv")}).'
        lines = [header, *(hit_line(n, h) for n, h in enumerate(hits, 1))]
        if not hits:
            lines.append("No papers matched; try broader terms or different keywords.")
        return ToolOutput("\n".join(lines), metadata={"query": query, "results": hits, "sources": status})


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [SearchPapersTool()]
