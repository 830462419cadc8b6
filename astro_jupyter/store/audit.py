"""The audit log: one row per prompt, tool use and permission decision."""

from __future__ import annotations

from typing import Any

from ..textsafe import clean_text, safe_json
from .db import Database


class AuditRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def record(
        self,
        event: str,
        *,
        session_id: str = "",
        run_id: str = "",
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        arguments: Any = None,
        is_error: bool | None = None,
        duration_ms: int | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        await self.db.execute(
            "INSERT INTO agent_audit_log (session_id, run_id, event, tool_name, tool_call_id, arguments, is_error,"
            " duration_ms, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                session_id,
                run_id,
                event,
                None if tool_name is None else clean_text(str(tool_name)),
                None if tool_call_id is None else clean_text(str(tool_call_id)),
                None if arguments is None else safe_json(arguments, compact=False),
                None if is_error is None else int(is_error),
                duration_ms,
                safe_json(detail or {}, compact=False),
            ),
        )

    async def list(self, session_id: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
        if session_id is None:
            return await self.db.fetchall("SELECT * FROM agent_audit_log ORDER BY id DESC LIMIT ?", (limit,))
        return await self.db.fetchall(
            "SELECT * FROM agent_audit_log WHERE session_id = ? ORDER BY id DESC LIMIT ?", (session_id, limit)
        )
