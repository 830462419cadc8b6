"""Runs and the ordered events of each run (kept so SSE clients can resume after a restart)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, NamedTuple

from ..errors import RunNotFound
from ..textsafe import clean_text, safe_json
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


class EncodedEvent(NamedTuple):
    """An event already in its wire JSON (``safe_json``), with its type for the ``type`` column."""

    type: str
    json: str


INTERRUPTED = "the process running this run stopped before it ended (a crash or kill); it was closed as an error"
_RESERVE = (
    "INSERT INTO agent_run_seq (run_id, reserved) VALUES (?, ?)"
    " ON CONFLICT (run_id) DO UPDATE SET reserved = MAX(reserved, excluded.reserved)"
)


class RunRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(
        self, run_id: str, session_id: str, *, owner: str = "", prompt: str = "", model: str = "", reserve_ids: int = 0
    ) -> None:
        """``reserve_ids``: the first block of event ids, reserved in the same transaction."""
        async with self.db.transaction():
            await self.db.execute(
                "INSERT INTO agent_runs (id, session_id, owner, prompt, model) VALUES (?, ?, ?, ?, ?)",
                (run_id, session_id, owner, prompt, model),
            )
            if reserve_ids > 0:
                await self.db.execute(_RESERVE, (run_id, reserve_ids))

    async def reserve_ids(self, run_id: str, upto: int) -> None:
        """Commit that ids up to ``upto`` may be shown to watchers (never lowers the mark)."""
        await self.db.execute(_RESERVE, (run_id, upto))

    async def last_event_id(self, run_id: str) -> int:
        """The highest id any watcher of the run can have seen: stored events and reserved ids."""
        value = await self.db.fetchval(
            "SELECT MAX(COALESCE((SELECT MAX(seq) FROM agent_events WHERE run_id = ?), 0),"
            " COALESCE((SELECT reserved FROM agent_run_seq WHERE run_id = ?), 0))",
            (run_id, run_id),
        )
        return int(value or 0)

    async def done_seq(self, run_id: str) -> int | None:
        """The id of the run's stored ``done`` event, if it has one."""
        value = await self.db.fetchval(
            "SELECT MAX(seq) FROM agent_events WHERE run_id = ? AND type = 'done'", (run_id,)
        )
        return None if value is None else int(value)

    async def close_interrupted(self, run_id: str, message: str = INTERRUPTED) -> int | None:
        """A run a dead process left 'running': store an ``error`` and the terminal ``done``
        numbered after every id a watcher can have seen, and mark it 'error', in one
        transaction. Returns the done's id (None when the run was not 'running')."""
        async with self.db.transaction():
            row = await self.db.fetchone("SELECT session_id, status FROM agent_runs WHERE id = ?", (run_id,))
            if row is None or row["status"] != "running":
                return None
            if await self.done_seq(run_id) is None:
                last = await self.last_event_id(run_id)
                done = {"type": "done", "session_id": row["session_id"], "run_id": run_id, "reason": "error"}
                error = {"type": "error", "message": message, "reason": "interrupted"}
                await self.db.executemany(
                    "INSERT INTO agent_events (run_id, seq, type, data) VALUES (?, ?, ?, ?)",
                    [(run_id, last + 1, "error", json.dumps(error)), (run_id, last + 2, "done", json.dumps(done))],
                )
                await self.db.execute(_RESERVE, (run_id, last + 2))
            await self.db.execute(
                "UPDATE agent_runs SET status = 'error', finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?",
                (run_id,),
            )
        return await self.done_seq(run_id)

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

    async def list_for_session(self, session_id: str) -> list[RunRecord]:
        rows = await self.db.fetchall("SELECT * FROM agent_runs WHERE session_id = ? ORDER BY started_at", (session_id,))
        return [RunRecord.from_row(r) for r in rows]

    async def list_running(self) -> list[str]:
        """Ids of runs stored as 'running' (live in some process, or left by a dead one)."""
        rows = await self.db.fetchall("SELECT id FROM agent_runs WHERE status = 'running' ORDER BY started_at")
        return [str(r["id"]) for r in rows]

    async def mark_interrupted(self, message: str = INTERRUPTED) -> int:
        """Runs left 'running' by a process that died are closed as errors at startup."""
        closed = 0
        for run_id in await self.list_running():
            closed += await self.close_interrupted(run_id, message) is not None
        return closed

    async def append_events(self, run_id: str, events: Iterable[tuple[int, "dict[str, Any] | EncodedEvent"]]) -> None:
        """Batch insert of (seq, wire-dict or already encoded event); one transaction per batch
        keeps up with fast streams.

        Each row is encoded on its own with ``safe_json``: one event carrying text SQLite cannot take
        (a lone surrogate) is stored cleaned instead of failing the whole batch. An ``EncodedEvent``
        (the bus's JSON, made with ``safe_json`` too) is stored as it is: nothing is encoded twice."""
        rows = [
            (run_id, seq, clean_text(data.type), data.json) if isinstance(data, EncodedEvent)
            else (run_id, seq, clean_text(str(data.get("type", ""))), safe_json(data))
            for seq, data in events
        ]
        await self.db.write_many("INSERT OR IGNORE INTO agent_events (run_id, seq, type, data) VALUES (?, ?, ?, ?)", rows)

    async def session_events(
        self, session_id: str, *, after_run: str | None = None, after_seq: int = 0, limit: int = 10_000
    ) -> list[tuple[str, int, str, dict[str, Any]]]:
        """The stored events of every run of a session, runs in start order, as ``(run_id, seq,
        created_at, wire-dict)``; ``after_run``/``after_seq`` continue after a page's last event."""
        if after_run is None:
            where, params = "", ()
        else:
            where = (" AND (r.started_at, r.rowid, e.seq) >"
                     " ((SELECT started_at FROM agent_runs WHERE id = ?), (SELECT rowid FROM agent_runs WHERE id = ?), ?)")
            params = (after_run, after_run, after_seq)
        rows = await self.db.fetchall(
            "SELECT e.run_id, e.seq, e.created_at, e.data FROM agent_events e JOIN agent_runs r ON r.id = e.run_id"
            f" WHERE r.session_id = ?{where} ORDER BY r.started_at, r.rowid, e.seq LIMIT ?",
            (session_id, *params, limit),
        )
        return [(r["run_id"], r["seq"], r["created_at"], json.loads(r["data"])) for r in rows]

    async def usage_events(self, session_id: str) -> list[dict[str, Any]]:
        """The last stored ``usage`` event of each run of a session (they are cumulative: the last
        one holds the run's total), runs in start order."""
        rows = await self.db.fetchall(
            "SELECT e.data FROM agent_events e JOIN agent_runs r ON r.id = e.run_id"
            " WHERE r.session_id = ? AND e.type = 'usage' AND e.seq = (SELECT MAX(l.seq) FROM agent_events l"
            "  WHERE l.run_id = e.run_id AND l.type = 'usage' AND json_extract(l.data, '$.subagent_id') IS NULL)"
            " ORDER BY r.started_at, r.rowid",
            (session_id,),
        )
        return [json.loads(r["data"]) for r in rows]

    async def events_after(self, run_id: str, after_seq: int = 0, limit: int = 10_000) -> list[tuple[int, dict[str, Any]]]:
        rows = await self.db.fetchall(
            "SELECT seq, data FROM agent_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (run_id, after_seq, limit),
        )
        return [(r["seq"], json.loads(r["data"])) for r in rows]
