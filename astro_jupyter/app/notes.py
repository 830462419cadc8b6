"""Notes on papers (the same notes service ``save_note`` uses), scoped to their owner."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest, NotAvailable
from .common import AppBase, Owner, visible_to


class NotesMixin(AppBase):
    def _notes(self) -> Any:
        if not hasattr(type(self.services), "notes"):
            raise NotAvailable("notes are not available yet")
        return self.services.notes

    async def list_notes(
        self, owner: Owner, *, paper_id: str | None = None, session_id: str | None = None, query: str | None = None
    ) -> list[dict[str, Any]]:
        """The caller's (and ownerless) notes, optionally of one paper / session, or matching ``query``."""
        service = self._notes()
        if session_id:
            await self.session(owner, session_id)  # type: ignore[attr-defined]
        notes = await (service.search(query, paper_id=paper_id, limit=500) if query else service.list(paper_id, limit=500))
        return [
            n.to_dict() for n in notes
            if visible_to(n.owner, owner) and (session_id is None or n.session_id == session_id)
        ]

    async def add_note(self, owner: str, body: dict[str, Any]) -> dict[str, Any]:
        """Validate a note request (paper, quote/comment, page, session) and save it."""
        paper_id = body.get("paper_id")
        if not isinstance(paper_id, str) or not paper_id.strip():
            raise InvalidRequest("'paper_id' must name a paper in the library", reason="invalid_note")
        fields: dict[str, Any] = {}
        for key in ("quote", "comment", "section", "session_id"):
            value = body.get(key)
            if value is not None and not isinstance(value, str):
                raise InvalidRequest(f"'{key}' must be a string", reason="invalid_note")
            if value:
                fields[key] = value
        page = body.get("page")
        if page is not None and (isinstance(page, bool) or not isinstance(page, int)):
            raise InvalidRequest("'page' must be an integer", reason="invalid_note")
        if not (fields.get("quote", "").strip() or fields.get("comment", "").strip()):
            raise InvalidRequest("a note needs a 'quote' or a 'comment' (or both)", reason="invalid_note")
        if "session_id" in fields:
            await self.session(owner, fields["session_id"])  # type: ignore[attr-defined]
        note = await self._notes().save(paper_id, page=page, owner=owner, **fields)
        return note.to_dict()
