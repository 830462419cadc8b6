"""History search (FTS5 over sessions and messages) over the sessions the caller may see."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest
from .common import AppBase, Owner


class SearchMixin(AppBase):
    async def search_history(
        self, owner: Owner, query: str, *, session_id: str | None = None, limit: int = 20, cursor: str | None = None
    ) -> dict[str, Any]:
        """A page of hits over the sessions ``owner`` may see, and the cursor of the next page ("more results")."""
        from ..store.history import InvalidCursor, snippet_to_html

        if session_id and owner is not None:
            await self.session(owner, session_id)  # type: ignore[attr-defined]
        try:
            page = await self.services.history.search_page(
                query, session_id=session_id, limit=limit, owner=owner, cursor=cursor
            )
        except InvalidCursor as exc:
            raise InvalidRequest(str(exc), reason="invalid_cursor") from exc
        results = [{**hit, "snippet_html": snippet_to_html(hit["snippet"])} for hit in page.hits]
        return {"results": results, "next_cursor": page.next_cursor, "window": page.window}
