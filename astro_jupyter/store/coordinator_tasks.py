"""Tasks delegated to workers in coordinator mode (``coordinator_tasks``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from .db import Database, Row

_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
FINAL_STATES = ("completed", "failed", "timeout", "stopped")


@dataclass
class CoordinatorTaskRecord:
    id: str
    session_id: str
    run_id: str
    description: str
    status: str
    result: str
    error: str
    steps: int
    created_at: str
    started_at: str | None
    finished_at: str | None

    @classmethod
    def from_row(cls, row: Row) -> "CoordinatorTaskRecord":
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @property
    def done(self) -> bool:
        return self.status in FINAL_STATES


class CoordinatorTaskRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self, description: str, *, session_id: str = "", run_id: str = "") -> str:
        task_id = f"task_{uuid.uuid4().hex[:10]}"
        await self.db.execute(
            "INSERT INTO coordinator_tasks (id, session_id, run_id, description) VALUES (?, ?, ?, ?)",
            (task_id, session_id, run_id, description),
        )
        return task_id

    async def set_running(self, task_id: str) -> None:
        await self.db.execute(
            f"UPDATE coordinator_tasks SET status = 'running', started_at = {_NOW} WHERE id = ? AND status = 'pending'",
            (task_id,),
        )

    async def finish(self, task_id: str, status: str, *, result: str = "", error: str = "", steps: int = 0) -> bool:
        """Record a final state unless one is already recorded (a stop is not overwritten)."""
        if status not in FINAL_STATES:
            raise ValueError(f"not a final state: {status}")
        count = await self.db.execute_rowcount(
            f"UPDATE coordinator_tasks SET status = ?, result = ?, error = ?, steps = ?, finished_at = {_NOW}"
            " WHERE id = ? AND status IN ('pending', 'running')",
            (status, result, error, steps, task_id),
        )
        return count > 0

    async def get(self, task_id: str) -> CoordinatorTaskRecord | None:
        row = await self.db.fetchone("SELECT * FROM coordinator_tasks WHERE id = ?", (task_id,))
        return None if row is None else CoordinatorTaskRecord.from_row(row)

    async def list(self, session_id: str) -> list[CoordinatorTaskRecord]:
        rows = await self.db.fetchall(
            "SELECT * FROM coordinator_tasks WHERE session_id = ? ORDER BY created_at, id", (session_id,)
        )
        return [CoordinatorTaskRecord.from_row(r) for r in rows]
