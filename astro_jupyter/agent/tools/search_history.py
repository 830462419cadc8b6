"""``search_history``: FTS5 search of earlier sessions, so work already done is not repeated; pages via a cursor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...store.history import InvalidCursor
from .base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ...config import AstroConfig


class SearchHistoryTool(AgentTool):
    name = "search_history"
    description = (
        "Full-text search of past sessions (titles, summaries and messages) to find research already done. "
        "Matches are marked «like this» in the snippets. The newest matches are ranked first; when more exist the "
        "result ends with a cursor: call again with the same query and that cursor for more (older) results."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "current_session_only": {"type": "boolean", "description": "Search only this session (default false)."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            "cursor": {"type": "string", "description": "The cursor a previous call returned, for more results."},
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
        cursor = str(args.get("cursor") or "").strip() or None
        try:
            # the current run's own messages (e.g. the question being asked) are not "history"
            page = await ctx.services.history.search_page(
                query, session_id=session, limit=limit, exclude_run_id=ctx.run_id, owner=ctx.owner, cursor=cursor
            )
        except InvalidCursor as exc:
            return ToolOutput.error(f"search_history: {exc}")
        hits = page.hits
        more = {"hits": hits, "next_cursor": page.next_cursor}
        if not hits:
            where = "this session" if session else "past sessions"
            if page.next_cursor:  # a filter skipped every match examined so far; older ones remain
                return ToolOutput(
                    f"No matches for {query!r} in {where} among the matches examined; older ones remain:"
                    f" call again with cursor {page.next_cursor!r}.",
                    metadata=more,
                )
            return ToolOutput(f"No {'more ' if cursor else ''}matches for {query!r} in {where}.", metadata=more)
        lines = [f"{len(hits)} match(es) for {query!r}{' (continued)' if cursor else ''}:"]
        for h in hits:
            where = f"message {h['message_id']} ({h['role']})" if h["message_id"] else "title/summary"
            lines.append(f"- session {h['session_id']} \"{h['session_title'] or 'untitled'}\" {where}: {h['snippet']}")
        if page.next_cursor:
            lines.append(f"More results: call search_history with the same query and cursor {page.next_cursor!r}.")
        return ToolOutput("\n".join(lines), metadata=more)


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [SearchHistoryTool()]
