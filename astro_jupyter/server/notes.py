"""Notes on papers (``astro/api/notes``), kept by the notes service (the same one ``save_note`` uses)."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import AUTH_RESOURCE, AstroHandler


class NotesHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self) -> None:
        notes = await self.service.list_notes(
            self.owner,
            paper_id=self.get_argument("paper_id", None) or None,
            session_id=self.get_argument("session_id", None) or None,
            query=(self.get_argument("q", "") or "").strip() or None,
        )
        self.write_json({"notes": notes})

    @web.authenticated
    @authorized
    async def post(self) -> None:
        self.write_json(await self.service.add_note(self.owner, self.json_body()), status=201)


handlers = [
    (r"astro/api/notes", NotesHandler),
]
