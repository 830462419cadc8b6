"""Todos of a session (``agent_tasks``): the whole list is replaced at once, in one transaction.

``todo_write`` sends the complete list each time (the model rewrites its plan), so the
repository stores exactly that list; validation (DAG, one in_progress) happens before.
"""

from __future__ import annotations

import json
from typing import Any

from .db import Database


class TaskRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def replace_all(self, session_id: str, todos: list[dict[str, Any]]) -> None:
        async with self.db.transaction():
            await self.db.execute("DELETE FROM agent_tasks WHERE session_id = ?", (session_id,))
            for position, todo in enumerate(todos):
                await self.db.execute(
                    "INSERT INTO agent_tasks (session_id, task_id, position, content, status, blocked_by)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        session_id,
                        todo["id"],
                        position,
                        todo["content"],
                        todo["status"],
                        json.dumps(list(todo.get("blocked_by") or [])),
                    ),
                )

    async def list(self, session_id: str) -> list[dict[str, Any]]:
        rows = await self.db.fetchall(
            "SELECT task_id, content, status, blocked_by, updated_at FROM agent_tasks"
            " WHERE session_id = ? ORDER BY position",
            (session_id,),
        )
        return [
            {
                "id": r["task_id"],
                "content": r["content"],
                "status": r["status"],
                "blocked_by": json.loads(r["blocked_by"] or "[]"),
            }
            for r in rows
        ]
