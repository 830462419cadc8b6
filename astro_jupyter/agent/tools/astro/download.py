"""download_paper: fetch a paper's PDF into the library through ordered fallback channels.

Flags (seed table: download is not concurrency-safe):
- not concurrency-safe — it writes into ``papers/`` and the library row;
- interrupt behaviour **Cancel**, not Block: a download can take minutes, and stopping it
  half-way tears nothing — bytes go to a temp file outside ``papers/`` that the service
  deletes when cancelled, and only a complete, verified PDF is moved into place
  with one atomic ``os.replace``;
- ``causes_sibling_abort`` — a failed download makes its batch's siblings (typically a
  parse_paper of the same paper) pointless;
- ``defer_loading`` — only needed once the model decides to fetch full text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....errors import AstroError
from ....services.download import DownloadFailed
from ..base import AgentTool, InterruptBehavior, ProgressReporter, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ....config import AstroConfig


def _size(n: int) -> str:
    return f"{n / 1_048_576:.1f} MB" if n >= 1_048_576 else f"{n / 1024:.0f} KB"


class DownloadPaperTool(AgentTool):
    name = "download_paper"
    description = (
        "Download a paper's PDF into the local library (arXiv, ADS, DOI/publisher fallbacks). "
        "Channels are tried in that order and the result reports what each one did. paper_id may be the library id, an arXiv "
        "id, DOI, ADS bibcode or URL. Afterwards parse_paper can turn it into text."
    )
    parameters = {
        "type": "object",
        "properties": {
            "paper_id": {"type": "string", "description": "Library id, arXiv id, DOI, bibcode or URL."},
            "force": {"type": "boolean", "description": "Download again even if the PDF is already in the library."},
        },
        "required": ["paper_id"],
        "additionalProperties": False,
    }
    interrupt_behavior = InterruptBehavior.CANCEL
    defer_loading = True
    causes_sibling_abort = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        async def no_progress(done: int | None = None, total: int | None = None, message: str = "") -> None:
            return None

        return await self.execute_with_progress(args, ctx, no_progress)

    async def execute_with_progress(
        self, args: dict[str, Any], ctx: ToolContext, progress: ProgressReporter
    ) -> ToolOutput:
        paper_id = str(args.get("paper_id") or "").strip()
        if not paper_id:
            return ToolOutput.error("download_paper needs a paper_id")
        try:
            result = await ctx.services.downloads.download(
                paper_id, progress=progress, cancelled=ctx.cancelled, force=bool(args.get("force"))
            )
        except DownloadFailed as exc:
            lines = [f"Could not download {exc.paper.id if exc.paper else paper_id}: every channel failed."]
            lines += [f"- {a.channel} {a.url}: {a.error}" for a in exc.attempts]
            if not exc.attempts:
                lines = [str(exc)]
            return ToolOutput.error(
                "\n".join(lines),
                paper_id=exc.paper.id if exc.paper else paper_id,
                attempts=[a.to_dict() for a in exc.attempts],
            )
        except AstroError as exc:
            return ToolOutput.error(f"Could not download {paper_id!r}: {exc}", paper_id=paper_id, reason=exc.reason)
        paper = result.paper
        title = paper.title or "(untitled)"
        if result.already:
            text = f"Already in the library: {paper.id} \"{title}\" ({_size(result.size)}) at {result.path}."
        else:
            text = f"Downloaded {paper.id} \"{title}\" ({_size(result.size)}) via {result.channel} from {result.url}\nSaved to {result.path}."
            failed = [a for a in result.attempts if not a.ok]
            if failed:
                text += "\nEarlier channels failed: " + "; ".join(f"{a.channel} ({a.error})" for a in failed)
        if result.notes:
            text += "\nNote: " + " ".join(result.notes)
        text += f"\nNext: parse_paper(paper_id=\"{paper.id}\") to read it."
        return ToolOutput(
            text,
            metadata={
                "paper_id": paper.id,
                "path": str(result.path),
                "bytes": result.size,
                "channel": result.channel,
                "url": result.url,
                "already": result.already,
                "state": paper.state,
                "attempts": [a.to_dict() for a in result.attempts],
            },
        )


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [DownloadPaperTool()]
