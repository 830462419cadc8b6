"""Sessions: the conversations listed in the sidebar and by ``%astro sessions``."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..errors import SessionNotFound
from .db import Database, Row


@dataclass
class SessionRecord:
    id: str
    title: str = ""
    summary: str = ""
    owner: str = ""
    model: str = ""
    coordinator: bool = False
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    updated_at: str = ""

    @classmethod
    def from_row(cls, row: Row) -> "SessionRecord":
        return cls(
            id=row["id"],
            title=row["title"],
            summary=row["summary"],
            owner=row["owner"],
            model=row["model"],
            coordinator=bool(row["coordinator"]),
            source=row["source"],
            metadata=json.loads(row["metadata"] or "{}"),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


class SessionRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(
        self,
        *,
        title: str = "",
        owner: str = "",
        model: str = "",
        coordinator: bool = False,
        source: str = "",
        session_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SessionRecord:
        sid = session_id or new_id("ses")
        await self.db.execute(
            "INSERT INTO agent_sessions (id, title, owner, model, coordinator, source, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (sid, title, owner, model, int(coordinator), source, json.dumps(metadata or {})),
        )
        return await self.get(sid)

    async def get(self, session_id: str) -> SessionRecord:
        row = await self.db.fetchone("SELECT * FROM agent_sessions WHERE id = ?", (session_id,))
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}")
        return SessionRecord.from_row(row)

    async def find(self, session_id: str) -> SessionRecord | None:
        row = await self.db.fetchone("SELECT * FROM agent_sessions WHERE id = ?", (session_id,))
        return None if row is None else SessionRecord.from_row(row)

    async def list(self, *, owner: str | None = None, limit: int = 200, offset: int = 0) -> list[SessionRecord]:
        if owner is None:
            rows = await self.db.fetchall(
                "SELECT * FROM agent_sessions ORDER BY updated_at DESC LIMIT ? OFFSET ?", (limit, offset)
            )
        else:
            rows = await self.db.fetchall(
                "SELECT * FROM agent_sessions WHERE owner = ? OR owner = '' ORDER BY updated_at DESC LIMIT ? OFFSET ?",
                (owner, limit, offset),
            )
        return [SessionRecord.from_row(r) for r in rows]

    async def list_summaries(
        self, *, owner: str | None = None, limit: int = 200, offset: int = 0
    ) -> list[tuple[SessionRecord, int, str]]:
        """``list`` with each session's prompt count and its latest run's model, in ONE query:
        the sidebar polls this list, and on a busy server every extra database round trip
        waited for the event loop again."""
        where = "" if owner is None else "WHERE s.owner = ? OR s.owner = '' "
        params: tuple[Any, ...] = (limit, offset) if owner is None else (owner, limit, offset)
        rows = await self.db.fetchall(
            "SELECT s.*,"
            " (SELECT COUNT(*) FROM agent_messages m WHERE m.session_id = s.id AND m.role = 'user') AS turn_count,"
            " (SELECT COALESCE(r.model, '') FROM agent_runs r WHERE r.session_id = s.id"
            "  ORDER BY r.started_at DESC, r.rowid DESC LIMIT 1) AS last_model"
            f" FROM agent_sessions s {where}ORDER BY s.updated_at DESC LIMIT ? OFFSET ?",
            params,
        )
        return [(SessionRecord.from_row(r), int(r["turn_count"] or 0), str(r["last_model"] or "")) for r in rows]

    async def update(self, session_id: str, **fields: Any) -> SessionRecord:
        allowed = {"title", "summary", "model", "coordinator", "metadata"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"cannot update {sorted(unknown)}")
        if fields:
            values = {
                k: (json.dumps(v) if k == "metadata" else int(v) if k == "coordinator" else v) for k, v in fields.items()
            }
            assignments = ", ".join(f"{k} = ?" for k in values)
            count = await self.db.execute_rowcount(
                f"UPDATE agent_sessions SET {assignments}, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?",
                (*values.values(), session_id),
            )
            if count == 0:
                raise SessionNotFound(f"no session {session_id!r}")
        return await self.get(session_id)

    async def touch(self, session_id: str) -> None:
        await self.db.execute(
            "UPDATE agent_sessions SET updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?", (session_id,)
        )

    async def delete(self, session_id: str) -> None:
        count = await self.db.execute_rowcount("DELETE FROM agent_sessions WHERE id = ?", (session_id,))
        if count == 0:
            raise SessionNotFound(f"no session {session_id!r}")
