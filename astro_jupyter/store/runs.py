"""Runs and the ordered events of each run (kept so SSE clients can resume after a restart)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

from ..errors import RunNotFound
from .db import Database, Row


@dataclass
class RunRecord:
    id: str
    session_id: str
    owner: str
    prompt: str
    model: str
    status: str
    started_at: str
    finished_at: str | None

    @classmethod
    def from_row(cls, row: Row) -> "RunRecord":
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class RunRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(self, run_id: str, session_id: str, *, owner: str = "", prompt: str = "", model: str = "") -> None:
        await self.db.execute(
            "INSERT INTO agent_runs (id, session_id, owner, prompt, model) VALUES (?, ?, ?, ?, ?)",
            (run_id, session_id, owner, prompt, model),
        )

    async def finish(self, run_id: str, status: str) -> None:
        await self.db.execute(
            "UPDATE agent_runs SET status = ?, finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?",
            (status, run_id),
        )

    async def get(self, run_id: str) -> RunRecord:
        row = await self.db.fetchone("SELECT * FROM agent_runs WHERE id = ?", (run_id,))
        if row is None:
            raise RunNotFound(f"no run {run_id!r}")
        return RunRecord.from_row(row)

    async def last_models(self, session_ids: list[str]) -> dict[str, str]:
        """The model of each session's latest run (the session list shows what a chat ran on)."""
        if not session_ids:
            return {}
        marks = ", ".join("?" for _ in session_ids)
        rows = await self.db.fetchall(
            f"SELECT session_id, model FROM agent_runs WHERE session_id IN ({marks}) ORDER BY started_at, rowid",
            tuple(session_ids),
        )
        return {r["session_id"]: r["model"] or "" for r in rows}  # later rows win

    async def list_for_session(self, session_id: str) -> list[RunRecord]:
        rows = await self.db.fetchall("SELECT * FROM agent_runs WHERE session_id = ? ORDER BY started_at", (session_id,))
        return [RunRecord.from_row(r) for r in rows]

    async def list_running(self) -> list[str]:
        """Ids of runs stored as 'running' (live in some process, or left by a dead one)."""
        rows = await self.db.fetchall("SELECT id FROM agent_runs WHERE status = 'running' ORDER BY started_at")
        return [str(r["id"]) for r in rows]

    async def mark_interrupted(self) -> int:
        """Runs left 'running' by a process that died are closed as errors at startup."""
        return await self.db.execute_rowcount(
            "UPDATE agent_runs SET status = 'error', finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
            " WHERE status = 'running'"
        )

    async def append_events(self, run_id: str, events: Iterable[tuple[int, dict[str, Any]]]) -> None:
        """Batch insert of (seq, wire-dict); one transaction per batch keeps up with fast streams."""
        rows = [(run_id, seq, data["type"], json.dumps(data, ensure_ascii=False, default=str)) for seq, data in events]
        await self.db.write_many("INSERT OR IGNORE INTO agent_events (run_id, seq, type, data) VALUES (?, ?, ?, ?)", rows)

    async def events_after(self, run_id: str, after_seq: int = 0, limit: int = 10_000) -> list[tuple[int, dict[str, Any]]]:
        rows = await self.db.fetchall(
            "SELECT seq, data FROM agent_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (run_id, after_seq, limit),
        )
        return [(r["seq"], json.loads(r["data"])) for r in rows]
