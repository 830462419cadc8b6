"""``parse_paper`` and ``get_paper_content``: turn a library paper into Markdown, then read it.

Thin: the work is in ``services/parse/``. Both accept the library id or an arXiv id, DOI or
bibcode (resolved through the library).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....errors import AstroError
from ..base import AgentTool, InterruptBehavior, PermissionRule, ToolContext, ToolOutput
from ..persist import MAX_OUTPUT_CHARS

if TYPE_CHECKING:
    from ....config import AstroConfig
    from ..base import ProgressReporter

_PAPER_ID = {
    "type": "string",
    "description": "Library id (e.g. 'arxiv:2501.10120') or an arXiv id, DOI or ADS bibcode of a paper in the library.",
}


class ParsePaperTool(AgentTool):
    name = "parse_paper"
    description = (
        "Parse a downloaded paper (PDF or ar5iv HTML) into Markdown with headings, reading-order paragraphs, "
        "tables and captions; store section-aware chunks and embeddings for rag_search. Reports progress per page."
    )
    parameters = {
        "type": "object",
        "properties": {
            "paper_id": _PAPER_ID,
            "force": {"type": "boolean", "description": "Parse again even if the paper is already parsed."},
        },
        "required": ["paper_id"],
        "additionalProperties": False,
    }
    interrupt_behavior = InterruptBehavior.BLOCK
    defer_loading = True
    causes_sibling_abort = True

    def classifier_summary(self) -> str:
        return "Parse a downloaded paper PDF/HTML into Markdown sections and searchable chunks."

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        async def silent(done: int | None = None, total: int | None = None, message: str = "") -> None:
            return None

        return await self.execute_with_progress(args, ctx, silent)

    async def execute_with_progress(self, args: dict[str, Any], ctx: ToolContext, progress: "ProgressReporter") -> ToolOutput:
        paper_id = str(args.get("paper_id") or "").strip()
        if not paper_id:
            return ToolOutput.error("parse_paper needs a 'paper_id' (library id, arXiv id, DOI or bibcode).")
        services = ctx.services
        try:
            record = await services.library.get(paper_id)
            if (
                not args.get("force")
                and record.state == "parsed"
                and record.markdown_path
                and Path(record.markdown_path).is_file()
                and await services.chunks.count(record.id) > 0
            ):
                _, sections = await services.parser.sections(record.id)
                names = [s.name for s in sections if s.name and s.part != "front"]
                return ToolOutput(
                    f"{record.title or record.id} ({record.id}) is already parsed: {len(names)} sections. "
                    "Read it with get_paper_content, or call parse_paper with force=true to parse again.\n"
                    "Sections: " + "; ".join(names),
                    metadata={"paper_id": record.id, "already_parsed": True, "sections": names},
                )
            result = await services.parser.parse(record.id, progress)
        except AstroError as exc:
            return ToolOutput.error(f"Cannot parse {paper_id!r}: {exc}", paper_id=paper_id, reason=exc.reason)
        body = [s for s in result.sections if not re.match(r"(?i)^references?$|bibliography", s)]
        lines = [
            f"Parsed {result.title or result.paper_id} ({result.paper_id}) from {result.source.upper()}"
            + (f": {result.pages} pages" if result.pages else "")
            + f" → {len(result.sections)} sections, {result.chunks} chunks"
            + (f" (+{result.references_chunks} reference chunks kept apart)" if result.references_chunks else "")
            + ".",
            "Sections: " + "; ".join(body[:60]) + (" …" if len(body) > 60 else ""),
        ]
        if result.embed_error:
            lines.append(f"Embedding failed ({result.embed_error}); rag_search will retry it, full-text search works now.")
        else:
            lines.append(f"Embedded {result.embedded} chunks ({services.embedder.name}).")
        lines.append("Read it with get_paper_content(paper_id, section=... or pages=...).")
        return ToolOutput(
            "\n".join(lines),
            metadata={
                "paper_id": result.paper_id,
                "markdown_path": str(result.markdown_path),
                "pages": result.pages,
                "sections": result.sections,
                "chunks": result.chunks,
                "references_chunks": result.references_chunks,
                "embedded": result.embedded,
                "embedding_backend": services.embedder.name,
                "source": result.source,
            },
        )


def _page_range(value: Any) -> tuple[int, int] | None:
    """``3``, ``"3"``, ``"3-5"``, ``"3–5"``, ``[3, 5]`` → (3, 5); raises ValueError when malformed."""
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value, value
    if isinstance(value, (list, tuple)) and 1 <= len(value) <= 2:
        first, last = int(value[0]), int(value[-1])
    else:
        match = re.fullmatch(r"\s*(\d+)\s*(?:[-–:]|to|\.\.)?\s*(\d+)?\s*", str(value))
        if not match:
            raise ValueError(f"pages must look like '3' or '3-5', not {value!r}")
        first = int(match.group(1))
        last = int(match.group(2) or first)
    if first < 1 or last < first:
        raise ValueError(f"invalid page range {value!r}")
    return first, last


class GetPaperContentTool(AgentTool):
    name = "get_paper_content"
    defer_loading = True
    description = (
        "Read a parsed paper's Markdown: a section by name (case-insensitive, prefix or approximate match; its "
        "sub-sections included), a page range, or the whole text; paginated with offset/limit in characters."
    )
    parameters = {
        "type": "object",
        "properties": {
            "paper_id": _PAPER_ID,
            "section": {"type": "string", "description": "Section name, e.g. 'Introduction', '3.2', 'methods', 'references'."},
            "pages": {"type": ["string", "integer"], "description": "A page or range, e.g. 4 or '4-6'."},
            "offset": {"type": "integer", "minimum": 0, "description": "Character offset to continue from."},
            "limit": {"type": "integer", "minimum": 200, "description": "Characters to return (default fits one result)."},
        },
        "required": ["paper_id"],
        "additionalProperties": False,
    }
    is_readonly = True

    def classifier_summary(self) -> str:
        return "Read a parsed paper's text by section name or page range."

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        paper_id = str(args.get("paper_id") or "").strip()
        if not paper_id:
            return ToolOutput.error("get_paper_content needs a 'paper_id'.")
        parser = ctx.services.parser
        try:
            pages = _page_range(args.get("pages"))
            record, sections = await parser.sections(paper_id)
        except ValueError as exc:
            return ToolOutput.error(str(exc))
        except AstroError as exc:
            return ToolOutput.error(f"Cannot read {paper_id!r}: {exc}", paper_id=paper_id, reason=exc.reason)
        names = [s.name for s in sections if s.name and s.level > 1]
        section = str(args.get("section") or "").strip()
        scope = "full text"
        if section:
            found = parser.find_section(sections, section)
            if not found:
                return ToolOutput.error(
                    f"No section of {record.id} matches {section!r}. Sections: " + "; ".join(names),
                    paper_id=record.id,
                    sections=names,
                )
            if pages:
                text = parser.page_text(found, *pages)
                scope = f"section {found[0].name!r}, pages {pages[0]}-{pages[1]}"
            else:
                text = "\n\n".join(s.markdown() for s in found)
                first, last = found[0].pages
                scope = f"section {found[0].name!r}" + (f" (pages {first}-{last})" if first else "")
        elif pages:
            total = record.metadata.get("pages") if isinstance(record.metadata, dict) else None
            text = parser.page_text(sections, *pages)
            if not text:
                known = max((p for s in sections for p, _ in s.paragraphs if p), default=total or 0)
                return ToolOutput.error(
                    f"No text on pages {pages[0]}-{pages[1]} of {record.id}"
                    + (f" (it has {known} pages)." if known else " (page numbers are only known for PDF papers)."),
                    paper_id=record.id,
                )
            scope = f"pages {pages[0]}-{pages[1]}"
        else:
            text = "\n\n".join(s.markdown() for s in sections)
        offset = max(0, int(args.get("offset") or 0))
        default_limit = max(1000, MAX_OUTPUT_CHARS - 500)
        limit = max(200, int(args.get("limit") or default_limit))
        total_chars = len(text)
        if offset >= total_chars and total_chars:
            return ToolOutput.error(f"offset {offset} is past the end ({total_chars} characters).", paper_id=record.id)
        piece = text[offset : offset + limit]
        end = offset + len(piece)
        header = f"{record.title or record.id} ({record.id}) — {scope}, characters {offset}-{end} of {total_chars}"
        footer = (
            f"\n\n[more: call get_paper_content with offset={end} to continue]" if end < total_chars else "\n\n[end]"
        )
        return ToolOutput(
            header + "\n\n" + piece + footer,
            metadata={
                "paper_id": record.id,
                "scope": scope,
                "offset": offset,
                "next_offset": end if end < total_chars else None,
                "total_chars": total_chars,
                "sections": names,
            },
        )


class RemovePaperTool(AgentTool):
    name = "remove_paper"
    description = (
        "Remove a paper from the library: its parsed passages (rag_search stops finding them), its PDF copy "
        "and Markdown. Notes on it are kept. Always asks the user first."
    )
    parameters = {"type": "object", "properties": {"paper_id": _PAPER_ID}, "required": ["paper_id"], "additionalProperties": False}
    interrupt_behavior = InterruptBehavior.BLOCK
    defer_loading = True

    def check_permissions(self, args: dict[str, Any]) -> list[PermissionRule]:
        paper_id = str(args.get("paper_id") or "")
        return [PermissionRule("ask", self.name, f"remove_paper wants to remove {paper_id} from the library "
                                                 "(its passages, PDF copy and Markdown; notes stay)")]

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        paper_id = str(args.get("paper_id") or "").strip()
        if not paper_id:
            return ToolOutput.error("remove_paper needs a 'paper_id' (library id, arXiv id, DOI or bibcode).")
        try:
            record, chunks = await ctx.services.parser.remove(paper_id)
        except AstroError as exc:
            return ToolOutput.error(f"Cannot remove {paper_id!r}: {exc}", paper_id=paper_id, reason=exc.reason)
        return ToolOutput(f"Removed {record.title or record.id} ({record.id}) and its {chunks} passages from the library.",
                          metadata={"paper_id": record.id, "chunks": chunks})


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [ParsePaperTool(), GetPaperContentTool(), RemovePaperTool()]
