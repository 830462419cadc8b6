"""Cross-session memories (``agent_memories``): short durable facts injected into system prompts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .db import Database, Row


@dataclass
class MemoryRecord:
    id: int
    content: str
    category: str
    owner: str
    source_session: str
    source: str
    created_at: str

    @classmethod
    def from_row(cls, row: Row) -> "MemoryRecord":
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class MemoryRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(
        self, content: str, *, category: str = "fact", owner: str = "", source_session: str = "", source: str = "tool"
    ) -> int:
        return await self.db.execute(
            "INSERT INTO agent_memories (content, category, owner, source_session, source) VALUES (?, ?, ?, ?, ?)",
            (content, category, owner, source_session, source),
        )

    async def list(self, *, owner: str | None = None, limit: int = 1000) -> list[MemoryRecord]:
        """``owner``'s memories and the ownerless ones ("" = ownerless only); None: every row (admin)."""
        if owner is None:
            rows = await self.db.fetchall("SELECT * FROM agent_memories ORDER BY id DESC LIMIT ?", (limit,))
        else:
            rows = await self.db.fetchall(
                "SELECT * FROM agent_memories WHERE owner = ? OR owner = '' ORDER BY id DESC LIMIT ?", (owner, limit)
            )
        return [MemoryRecord.from_row(r) for r in rows]

    async def get(self, memory_id: int) -> MemoryRecord | None:
        row = await self.db.fetchone("SELECT * FROM agent_memories WHERE id = ?", (memory_id,))
        return None if row is None else MemoryRecord.from_row(row)

    async def delete(self, memory_id: int) -> bool:
        return await self.db.execute_rowcount("DELETE FROM agent_memories WHERE id = ?", (memory_id,)) > 0
