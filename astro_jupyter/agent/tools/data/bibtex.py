"""``export_bibtex``: BibTeX for papers, or for every paper a session's answers cite.

Thin on purpose: ``services/bibtex.py`` asks ADS for its entries, checks they are the ones
asked for, and builds local entries for the rest; the tool reports keys, sources and problems.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base import AgentTool, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ....config import AstroConfig

MAX_PAPERS = 200
MAX_TEXT_CHARS = 20_000  # BibTeX shown to the model; the full text is in the result's metadata


class ExportBibtexTool(AgentTool):
    name = "export_bibtex"
    description = (
        "BibTeX entries for papers, from NASA ADS where it knows them (keyed by bibcode) and from the library's "
        "metadata otherwise (arXiv-only papers). Give paper_ids (library ids, arXiv ids, DOIs, bibcodes), or "
        "session ('current' or a session id) for every paper that session's answers cite. Cite papers by the keys returned."
    )
    parameters = {
        "type": "object",
        "properties": {
            "paper_ids": {
                "type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_PAPERS,
                "description": "Papers to export: library ids, arXiv ids, DOIs or ADS bibcodes.",
            },
            "session": {"type": "string", "description": "'current', or a session id: every paper its answers cite."},
        },
        "additionalProperties": False,
    }
    is_readonly = True
    defer_loading = True  # a bibliography is asked for now and then; the catalog names it

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        paper_ids = args.get("paper_ids")
        session = str(args.get("session") or "").strip()
        if bool(paper_ids) == bool(session):
            return ToolOutput.error("export_bibtex takes either paper_ids (a list of paper ids) or session ('current' or a session id), not both or neither.")
        bib = ctx.services.bibtex
        if session:
            session_id = ctx.session_id if session == "current" else session
            found = await ctx.services.sessions.find(session_id)
            if found is None or found.owner not in ("", ctx.owner):
                return ToolOutput.error(f"export_bibtex: no session {session!r}", session=session)
            messages = await ctx.services.messages.list(session_id)
            result = await bib.for_texts(m.content for m in messages if m.role == "assistant")
            if not result.entries and not result.problems:
                return ToolOutput(f"Session {session_id} cites no paper by bibcode, arXiv id or DOI.",
                                  metadata={"bibtex": "", "keys": {}, "entries": [], "problems": []})
        else:
            if not isinstance(paper_ids, list) or not all(isinstance(p, str) for p in paper_ids):
                return ToolOutput.error("export_bibtex: paper_ids must be a list of strings")
            problems: list[str] = []
            records = await bib.papers(paper_ids, problems)
            result = await bib.entries(records)
            result.problems[:0] = problems
        if not result.entries:
            return ToolOutput.error("No BibTeX could be made:\n" + "\n".join(f"- {p}" for p in result.problems),
                                    problems=result.problems)
        text = result.text
        lines = [f"{len(result.entries)} BibTeX entr{'y' if len(result.entries) == 1 else 'ies'} (cite by key):"]
        lines += [f"- {e.key}  ({e.paper_id}; {'NASA ADS' if e.source == 'ads' else 'built from library metadata'})" for e in result.entries]
        if result.problems:
            lines += ["Notes:"] + [f"- {p}" for p in result.problems]
        shown = text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + f"\n% ... {len(text) - MAX_TEXT_CHARS} more characters in the result's metadata\n"
        meta = {
            "bibtex": text, "keys": result.keys(), "problems": result.problems,
            "entries": [{"key": e.key, "paper_id": e.paper_id, "source": e.source} for e in result.entries],
        }
        return ToolOutput("\n".join(lines) + "\n\n" + shown, metadata=meta)


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [ExportBibtexTool()]
