"""``GET astro/api/search/history?q=&session_id=&limit=&cursor=``: FTS5 search over the caller's sessions and messages.

The newest matches are ranked first; ``next_cursor`` in the reply, passed back as ``cursor``,
fetches the next page ("more results"), older matches included.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import AUTH_RESOURCE, AstroHandler
from ..errors import InvalidRequest


class HistorySearchHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self) -> None:
        query = (self.get_argument("q", "") or "").strip()
        if not query:
            raise InvalidRequest("give the words to search for as ?q=", reason="missing_query")
        if len(query) > 1000:
            raise InvalidRequest("the query is longer than 1000 characters", reason="invalid_query")
        session_id = self.get_argument("session_id", None) or None
        limit = self.int_arg("limit", 20, 1, 200)
        cursor = self.get_argument("cursor", None) or None
        page = await self.service.search_history(self.owner, query, session_id=session_id, limit=limit, cursor=cursor)
        self.write_json({"query": query, "session_id": session_id, **page})


handlers = [
    (r"astro/api/search/history", HistorySearchHandler),
]
