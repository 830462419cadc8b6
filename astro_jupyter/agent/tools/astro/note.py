"""``save_note``: keep a highlighted quote and a comment on a paper (page and/or section)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....errors import AstroError
from ..base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ....config import AstroConfig


class SaveNoteTool(AgentTool):
    name = "save_note"
    defer_loading = True
    description = (
        "Save a note on a library paper: a quoted passage and/or your comment, with the page or section it "
        "belongs to. Notes are listed and searched in the sidebar and with %astro notes."
    )
    parameters = {
        "type": "object",
        "properties": {
            "paper_id": {"type": "string", "description": "Library id, arXiv id, DOI or bibcode."},
            "quote": {"type": "string", "description": "The highlighted text, verbatim."},
            "comment": {"type": "string", "description": "The note itself."},
            "page": {"type": "integer", "minimum": 1},
            "section": {"type": "string"},
        },
        "required": ["paper_id"],
        "additionalProperties": False,
    }
    interrupt_behavior = InterruptBehavior.BLOCK

    def classifier_summary(self) -> str:
        return "Save a quote and comment as a note on a paper."

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        paper_id = str(args.get("paper_id") or "").strip()
        if not paper_id:
            return ToolOutput.error("save_note needs a 'paper_id'.")
        page = args.get("page")
        try:
            note = await ctx.services.notes.save(
                paper_id,
                quote=str(args.get("quote") or ""),
                comment=str(args.get("comment") or ""),
                page=int(page) if page is not None else None,
                section=str(args.get("section") or ""),
                session_id=ctx.session_id or None,
                owner=ctx.owner,  # listed to the run's user only (GET astro/api/notes)
            )
        except AstroError as exc:
            return ToolOutput.error(f"Note not saved: {exc}", paper_id=paper_id, reason=exc.reason)
        where = ", ".join(x for x in (f"p. {note.page}" if note.page else "", note.section) if x)
        return ToolOutput(
            f"Saved note #{note.id} on {note.paper_id}" + (f" ({where})" if where else "") + ".",
            metadata=note.to_dict(),
        )


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [SaveNoteTool()]
