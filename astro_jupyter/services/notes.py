"""Notes on papers: save (resolving the paper through the library), list, search.

Used by the ``save_note`` tool, the notes API of the server and the magics. A note may
name a page or a section (or both); the quote is the highlighted text, the comment the
reader's own words. At least one of quote and comment is required.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ToolInputError

if TYPE_CHECKING:
    from ..store.notes import NoteRecord, NoteRepository

MAX_NOTE_CHARS = 20_000


class NotesService:
    def __init__(self, repo: "NoteRepository", library: Any) -> None:
        self.repo = repo
        self.library = library

    async def save(
        self,
        paper_id: str,
        *,
        quote: str = "",
        comment: str = "",
        page: int | None = None,
        section: str = "",
        session_id: str | None = None,
        owner: str = "",
    ) -> "NoteRecord":
        quote, comment, section = (quote or "").strip(), (comment or "").strip(), (section or "").strip()
        if not quote and not comment:
            raise ToolInputError("a note needs a quote or a comment (or both)")
        if len(quote) + len(comment) > MAX_NOTE_CHARS:
            raise ToolInputError(f"a note is limited to {MAX_NOTE_CHARS} characters of quote and comment")
        if page is not None and page < 1:
            raise ToolInputError("page numbers start at 1")
        record = await self.library.get(paper_id)  # NotFoundError for unknown papers
        pages = (record.metadata or {}).get("pages")
        if page is not None and isinstance(pages, int) and pages and page > pages:
            raise ToolInputError(f"page {page} is beyond the paper's {pages} pages")
        return await self.repo.add(
            paper_id=record.id, quote=quote, comment=comment, page=page, section=section, session_id=session_id, owner=owner,
            paper_title=record.title,
        )

    async def list(self, paper_id: str | None = None, *, limit: int = 100) -> list["NoteRecord"]:
        if paper_id:
            paper_id = (await self.library.get(paper_id)).id
        return await self.repo.list(paper_id=paper_id, limit=limit)

    async def search(self, text: str, *, paper_id: str | None = None, limit: int = 50) -> list["NoteRecord"]:
        if paper_id:
            paper_id = (await self.library.get(paper_id)).id
        if not text.strip():
            return await self.repo.list(paper_id=paper_id, limit=limit)
        return await self.repo.search(text, paper_id=paper_id, limit=limit)
