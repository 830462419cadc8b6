"""get_paper_metadata: one paper's full record (and, through ADS, its references or citations).

``describe_record`` is also what ``astro library show`` prints, so the model and the user read
the same record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....errors import AstroError
from ....services.library import local_status
from ....store.papers import PaperRecord
from ..base import AgentTool, ToolContext, ToolOutput
from .search import hit_dict, hit_line

if TYPE_CHECKING:
    from ....config import AstroConfig


def describe_record(record: PaperRecord) -> str:
    """A full, readable record for the model (get_paper_metadata) and the CLI."""
    lines = [
        f"{record.title or '(untitled)'}",
        f"Library id: {record.id} · status: {local_status(record).replace('_', ' ')}",
        f"Authors: {'; '.join(record.authors) if record.authors else 'unknown'}",
    ]
    if record.year or record.journal:
        lines.append(f"Published: {record.journal or 'preprint'}{f' ({record.year})' if record.year else ''}")
    ids = [
        f"arXiv {record.arxiv_id}{record.arxiv_version or ''}" if record.arxiv_id else "",
        f"DOI {record.doi}" if record.doi else "",
        f"bibcode {record.bibcode}" if record.bibcode else "",
    ]
    lines.append("Identifiers: " + (", ".join(i for i in ids if i) or "none"))
    lines.append(f"Citations: {record.citation_count if record.citation_count is not None else 'unknown'}")
    if record.keywords:
        lines.append(f"Keywords: {', '.join(record.keywords)}")
    category = record.metadata.get("primary_category")
    if category:
        lines.append(f"arXiv category: {category}")
    if record.pdf_path:
        lines.append(f"PDF: {record.pdf_path}")
    if record.markdown_path:
        lines.append(f"Markdown: {record.markdown_path}")
    if record.url:
        lines.append(f"URL: {record.url}")
    lines.append("Abstract: " + (record.abstract or "(not available)"))
    return "\n".join(lines)


class GetPaperMetadataTool(AgentTool):
    name = "get_paper_metadata"
    description = (
        "Get one paper's full record: authors, journal, keywords, abstract, citations, library state. "
        "paper_id may be the library id, an arXiv id, DOI, "
        "ADS bibcode or URL; unknown papers are looked up in ADS/arXiv and remembered. Optionally lists "
        "the paper's references or citing papers (needs ADS)."
    )
    parameters = {
        "type": "object",
        "properties": {
            "paper_id": {"type": "string", "description": "Library id, arXiv id, DOI, bibcode or URL."},
            "include": {
                "type": "array",
                "items": {"type": "string", "enum": ["references", "citations"]},
                "description": "Also list papers this one cites (references) or that cite it (citations).",
            },
            "rows": {"type": "integer", "minimum": 1, "maximum": 50, "description": "How many references/citations (default 10)."},
        },
        "required": ["paper_id"],
        "additionalProperties": False,
    }
    is_readonly = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        paper_id = str(args.get("paper_id") or "").strip()
        if not paper_id:
            return ToolOutput.error("get_paper_metadata needs a paper_id")
        try:
            record = await ctx.services.library.resolve(paper_id)
        except AstroError as exc:
            return ToolOutput.error(f"Could not get metadata for {paper_id!r}: {exc}", paper_id=paper_id, reason=exc.reason)
        text = describe_record(record)
        meta: dict[str, Any] = {"paper": record.to_dict(), "status": local_status(record)}
        rows = max(1, min(int(args.get("rows") or 10), 50))
        for kind in [k for k in (args.get("include") or []) if k in ("references", "citations")]:
            text += "\n\n" + await self._related(ctx, record, kind, rows, meta)
        return ToolOutput(text, metadata=meta)

    async def _related(self, ctx: ToolContext, record: PaperRecord, kind: str, rows: int, meta: dict[str, Any]) -> str:
        ads = ctx.services.ads
        if not record.bibcode:
            meta[kind] = {"error": "no ADS bibcode known for this paper"}
            return f"{kind.capitalize()}: unavailable (no ADS bibcode known for this paper)."
        if not ads.configured:
            meta[kind] = {"error": "ADS_API_TOKEN is not set"}
            return f"{kind.capitalize()}: unavailable (set ADS_API_TOKEN to use NASA ADS)."
        try:
            result = await (ads.references if kind == "references" else ads.citations)(record.bibcode, rows=rows)
        except AstroError as exc:
            meta[kind] = {"error": str(exc)}
            return f"{kind.capitalize()}: lookup failed ({exc})."
        stored = await ctx.services.library.annotate(result.records)
        items = [hit_dict(r, ["ads"], stored.get(id(r))) for r in result.records]
        meta[kind] = {"total": result.num_found, "results": items}
        lines = [f"{kind.capitalize()} ({len(items)} of {result.num_found}):"]
        lines += [hit_line(n, h) for n, h in enumerate(items, 1)]
        return "\n".join(lines)


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [GetPaperMetadataTool()]
