"""The ``notes`` table: highlights and comments on papers (quote, page or section, comment)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .db import Database


@dataclass
class NoteRecord:
    id: int
    paper_id: str | None
    session_id: str | None
    page: int | None
    section: str
    quote: str
    comment: str
    owner: str
    created_at: str

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "NoteRecord":
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_COLUMNS = "id, paper_id, session_id, page, section, quote, comment, owner, created_at"


def _like(text: str) -> str:
    """A LIKE pattern matching ``text`` literally (``%``/``_`` escaped with ``\\``)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class NoteRepository:
    def __init__(self, db: "Database") -> None:
        self.db = db

    async def add(
        self,
        *,
        paper_id: str | None,
        quote: str = "",
        comment: str = "",
        page: int | None = None,
        section: str = "",
        session_id: str | None = None,
        owner: str = "",
        paper_title: str = "",
    ) -> NoteRecord:
        async with self.db.transaction():
            if paper_id:
                # a paper of the shared library (PostgreSQL) has no row here: a reference row keeps the
                # note's link (notes.paper_id references papers); a paper of this library is left alone
                await self.db.execute(
                    "INSERT OR IGNORE INTO papers (id, title, source) VALUES (?, ?, 'shared-library')",
                    (paper_id, paper_title))
            note_id = await self.db.execute(
                "INSERT INTO notes (paper_id, session_id, page, section, quote, comment, owner) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (paper_id, session_id, page, section, quote, comment, owner),
            )
        return await self.get(note_id)

    async def get(self, note_id: int) -> NoteRecord:
        row = await self.db.fetchone(f"SELECT {_COLUMNS} FROM notes WHERE id = ?", (note_id,))
        if row is None:
            raise KeyError(note_id)
        return NoteRecord.from_row(row)

    async def list(self, *, paper_id: str | None = None, limit: int = 100, offset: int = 0) -> list[NoteRecord]:
        sql = f"SELECT {_COLUMNS} FROM notes"
        params: list[Any] = []
        if paper_id:
            sql += " WHERE paper_id = ?"
            params.append(paper_id)
        sql += " ORDER BY id DESC LIMIT ? OFFSET ?"
        params += [int(limit), int(offset)]
        return [NoteRecord.from_row(r) for r in await self.db.fetchall(sql, params)]

    async def search(self, text: str, *, paper_id: str | None = None, limit: int = 50) -> list[NoteRecord]:
        """Notes whose quote, comment or section contains every word of ``text`` (case-insensitive)."""
        words = text.split()
        sql = f"SELECT {_COLUMNS} FROM notes WHERE 1 = 1"
        params: list[Any] = []
        for word in words[:12]:
            sql += " AND (quote LIKE ? ESCAPE '\\' OR comment LIKE ? ESCAPE '\\' OR section LIKE ? ESCAPE '\\')"
            params += [_like(word)] * 3
        if paper_id:
            sql += " AND paper_id = ?"
            params.append(paper_id)
        sql += " ORDER BY id DESC LIMIT ?"
        params.append(int(limit))
        return [NoteRecord.from_row(r) for r in await self.db.fetchall(sql, params)]

    async def delete(self, note_id: int) -> bool:
        async with self.db.transaction():
            return await self.db.execute_rowcount("DELETE FROM notes WHERE id = ?", (note_id,)) > 0
