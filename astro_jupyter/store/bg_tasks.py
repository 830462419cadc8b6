"""Background tool runs (``bg_tasks``): they outlive the turn that started them.

A row is written before the work starts and updated when it ends, so a task is never
lost: results not yet shown to the model stay ``delivered = 0`` until a turn drains them,
and rows left ``queued``/``running`` by a process that died are closed as failures.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from .db import Database, Row

_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"


@dataclass
class BgTaskRecord:
    id: str
    session_id: str
    run_id: str
    tool_name: str
    arguments: dict[str, Any]
    status: str
    result: str
    error: str
    delivered: bool
    created_at: str
    finished_at: str | None

    @classmethod
    def from_row(cls, row: Row) -> "BgTaskRecord":
        data = dict(row)
        data["arguments"] = json.loads(data["arguments"] or "{}")
        data["delivered"] = bool(data["delivered"])
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class BgTaskRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self, tool_name: str, arguments: dict[str, Any], *, session_id: str = "", run_id: str = "") -> str:
        task_id = f"bg_{uuid.uuid4().hex[:12]}"
        await self.db.execute(
            "INSERT INTO bg_tasks (id, session_id, run_id, tool_name, arguments) VALUES (?, ?, ?, ?, ?)",
            (task_id, session_id, run_id, tool_name, json.dumps(arguments)),
        )
        return task_id

    async def set_running(self, task_id: str) -> None:
        await self.db.execute("UPDATE bg_tasks SET status = 'running' WHERE id = ?", (task_id,))

    async def finish(self, task_id: str, *, ok: bool, result: str = "", error: str = "") -> None:
        await self.db.execute(
            f"UPDATE bg_tasks SET status = ?, result = ?, error = ?, finished_at = {_NOW} WHERE id = ?",
            ("completed" if ok else "failed", result, error, task_id),
        )

    async def get(self, task_id: str) -> BgTaskRecord | None:
        row = await self.db.fetchone("SELECT * FROM bg_tasks WHERE id = ?", (task_id,))
        return None if row is None else BgTaskRecord.from_row(row)

    async def list(self, session_id: str | None = None, limit: int = 50) -> list[BgTaskRecord]:
        if session_id is None:
            rows = await self.db.fetchall("SELECT * FROM bg_tasks ORDER BY created_at DESC LIMIT ?", (limit,))
        else:
            rows = await self.db.fetchall(
                "SELECT * FROM bg_tasks WHERE session_id = ? ORDER BY created_at DESC LIMIT ?", (session_id, limit)
            )
        return [BgTaskRecord.from_row(r) for r in rows]

    async def take_undelivered(self, session_id: str) -> list[BgTaskRecord]:
        """Finished tasks not yet shown to the model, marked delivered in the same transaction."""
        if not await self.db.fetchval(
            "SELECT 1 FROM bg_tasks WHERE session_id = ? AND delivered = 0 AND status IN ('completed', 'failed') LIMIT 1",
            (session_id,),
        ):
            return []  # the common case, checked without taking the write lock
        async with self.db.transaction():
            rows = await self.db.fetchall(
                "SELECT * FROM bg_tasks WHERE session_id = ? AND delivered = 0 AND status IN ('completed', 'failed')"
                " ORDER BY finished_at, id",
                (session_id,),
            )
            if rows:
                await self.db.executemany("UPDATE bg_tasks SET delivered = 1 WHERE id = ?", [(r["id"],) for r in rows])
        return [BgTaskRecord.from_row(r) for r in rows]

    async def fail_orphans(self, live_ids: set[str], reason: str) -> int:
        """Close rows still queued/running that no live worker owns (the process that ran them died)."""
        rows = await self.db.fetchall("SELECT id FROM bg_tasks WHERE status IN ('queued', 'running')")
        orphans = [r["id"] for r in rows if r["id"] not in live_ids]
        for task_id in orphans:
            await self.finish(task_id, ok=False, error=reason)
        return len(orphans)
