"""``search_history``: FTS5 search of earlier sessions, so work already done is not repeated."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ...config import AstroConfig


class SearchHistoryTool(AgentTool):
    name = "search_history"
    description = (
        "Full-text search of past sessions (titles, summaries and messages) to find research already done. "
        "Matches are marked «like this» in the snippets."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "current_session_only": {"type": "boolean", "description": "Search only this session (default false)."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        },
        "required": ["query"],
    }
    interrupt_behavior = InterruptBehavior.CANCEL
    defer_loading = True

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        query = str(args.get("query") or "").strip()
        if not query:
            return ToolOutput.error("search_history needs a query")
        session = ctx.session_id if args.get("current_session_only") else None
        limit = int(args.get("limit") or 10)
        # the current run's own messages (e.g. the question being asked) are not "history"
        hits = await ctx.services.history.search(query, session_id=session, limit=limit, exclude_run_id=ctx.run_id,
                                                 owner=ctx.owner)
        if not hits:
            where = "this session" if session else "past sessions"
            return ToolOutput(f"No matches for {query!r} in {where}.", metadata={"hits": []})
        lines = [f"{len(hits)} match(es) for {query!r}:"]
        for h in hits:
            where = f"message {h['message_id']} ({h['role']})" if h["message_id"] else "title/summary"
            lines.append(f"- session {h['session_id']} \"{h['session_title'] or 'untitled'}\" {where}: {h['snippet']}")
        return ToolOutput("\n".join(lines), metadata={"hits": hits})


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [SearchHistoryTool()]
