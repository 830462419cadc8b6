"""The audit log: one row per prompt, tool use and permission decision."""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator

from ..textsafe import clean_text, safe_json
from .db import Database

INSERT = (
    "INSERT INTO agent_audit_log (session_id, run_id, event, tool_name, tool_call_id, arguments, is_error,"
    " duration_ms, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class HeldRows:
    """Audit rows kept back for the caller's own transaction (``AuditRepository.held``)."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.open = True


_HELD: contextvars.ContextVar[HeldRows | None] = contextvars.ContextVar("astro_audit_held", default=None)


class AuditRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    @staticmethod
    @contextlib.contextmanager
    def held() -> Iterator[HeldRows]:
        """Rows recorded in this block (and tasks it starts) are kept, not written: the caller writes
        them in the transaction that stores the call (``astro-jupyter mcp``: one commit per call, not
        two, and a call's audit row and its session land together). A row recorded after the block
        (a task that outlived it) is written as usual."""
        holder = HeldRows()
        token = _HELD.set(holder)
        try:
            yield holder
        finally:
            holder.open = False
            _HELD.reset(token)

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
        row = (
            session_id,
            run_id,
            event,
            None if tool_name is None else clean_text(str(tool_name)),
            None if tool_call_id is None else clean_text(str(tool_call_id)),
            None if arguments is None else safe_json(arguments, compact=False),
            None if is_error is None else int(is_error),
            duration_ms,
            safe_json(detail or {}, compact=False),
        )
        holder = _HELD.get()
        if holder is not None and holder.open:
            holder.rows.append(row)
            return
        await self.db.execute(INSERT, row)

    async def list(self, session_id: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
        if session_id is None:
            return await self.db.fetchall("SELECT * FROM agent_audit_log ORDER BY id DESC LIMIT ?", (limit,))
        return await self.db.fetchall(
            "SELECT * FROM agent_audit_log WHERE session_id = ? ORDER BY id DESC LIMIT ?", (session_id, limit)
        )
