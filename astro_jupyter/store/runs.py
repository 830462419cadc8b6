"""Runs and the ordered events of each run (kept so SSE clients can resume after a restart)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Iterable, NamedTuple

from ..errors import AstroError, RunNotFound
from ..textsafe import clean_text, safe_json
from .db import Database, Row

log = logging.getLogger(__name__)


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
        await self._replay_ended(run_id)
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
        if any(kind == "done" for _, _, kind, _ in rows):
            await self._replay_ended(run_id)

    async def session_events(
        self, session_id: str, *, after_run: str | None = None, after_seq: int = 0, limit: int = 10_000
    ) -> tuple[list[tuple[str, int, str, dict[str, Any]]], tuple[str, int] | None]:
        """The stored events of every run of a session, runs in start order, consecutive text and
        thinking deltas folded (``fold_event_rows``), as ``(run_id, seq, created_at, wire-dict)``,
        starting after ``after_run``/``after_seq``, about ``limit`` stored events' worth; with the
        ``(run_id, seq)`` to continue after, None when nothing is left.

        Why: reopening a 5,000-message session used to read, parse and fold ~40k delta rows on every
        open (~0.35 s of the server's one loop). A run whose ``done`` was stored has its folded
        replay in ``agent_run_replay`` (one row, ``_store_replay``); only runs without a current one
        (still running, or stored before the table existed) and runs that do not fit what is left of
        the page are read from ``agent_events`` as before."""
        runs = await self._runs_with_replays(session_id)
        if after_run is not None:
            ids = [r["id"] for r in runs]
            runs = runs[ids.index(after_run):] if after_run in ids else []
        out: list[tuple[str, int, str, dict[str, Any]]] = []
        used, last, i = 0, None, 0
        while i < len(runs):
            budget = limit - used
            if budget <= 0:
                return out, last
            run = runs[i]
            from_seq = after_seq if i == 0 and after_run is not None else 0
            max_seq = run["max_seq"] or 0
            if _replay_current(run) and from_seq == 0 and max_seq <= budget:
                out.extend((e["run_id"], e["seq"], e["time"], e["event"]) for e in json.loads(run["events"]))
                used, last, i = used + max_seq, (run["id"], max_seq), i + 1
                continue
            j = i + 1  # this run and the next ones without a current replay: one read of agent_events
            while j < len(runs) and not _replay_current(runs[j]):
                j += 1
            rows = await self._event_rows(session_id, run, from_seq, runs[j - 1], budget)
            out.extend(fold_event_rows(tuple(r.values()) for r in rows))
            if rows:
                last = (rows[-1]["run_id"], rows[-1]["seq"])
            if len(rows) == budget:
                return out, last
            used, i = used + len(rows), j
        return out, None

    async def session_events_json(self, session_id: str) -> list[str]:
        """Every stored event of the session's runs, as ``session_events`` gives them over all its
        pages, as JSON texts of ``{"run_id", "seq", "time", "event"}`` objects, each text one or more
        objects joined by commas (a JSON array's inside). Why: a run's stored replay is already that
        text, so a reopen copies it instead of parsing and re-encoding megabytes."""
        runs = await self._runs_with_replays(session_id)
        out: list[str] = []
        i = 0
        while i < len(runs):
            if _replay_current(runs[i]):
                inner = runs[i]["events"].strip()[1:-1]
                if inner:
                    out.append(inner)
                i += 1
                continue
            j = i + 1
            while j < len(runs) and not _replay_current(runs[j]):
                j += 1
            rows = await self._event_rows(session_id, runs[i], 0, runs[j - 1], -1)
            out.extend(safe_json({"run_id": run_id, "seq": seq, "time": created, "event": data})
                       for run_id, seq, created, data in fold_event_rows(tuple(r.values()) for r in rows))
            i = j
        return out

    async def _runs_with_replays(self, session_id: str) -> list[Row]:
        """The session's runs in start order, each with its stored replay (if any) and last seq."""
        return await self.db.fetchall(
            "SELECT r.id, r.started_at, r.rowid AS rid, p.last_seq, p.events,"
            " (SELECT MAX(e.seq) FROM agent_events e WHERE e.run_id = r.id) AS max_seq"
            " FROM agent_runs r LEFT JOIN agent_run_replay p ON p.run_id = r.id"
            " WHERE r.session_id = ? ORDER BY r.started_at, r.rowid",
            (session_id,),
        )

    async def _event_rows(self, session_id: str, first: Row, after_seq: int, last: Row, limit: int) -> list[Row]:
        """The stored event rows of the runs from ``first`` (after its ``after_seq``) to ``last``, in
        order, at most ``limit`` (-1: all), delta fields pulled out for ``fold_event_rows``."""
        return await self.db.fetchall(
            f"SELECT e.run_id, e.seq, e.created_at, e.type, e.data, {_DELTA_FIELDS_SQL}"
            " FROM agent_events e JOIN agent_runs r ON r.id = e.run_id WHERE r.session_id = ?"
            " AND (r.started_at, r.rowid, e.seq) > (?, ?, ?) AND (r.started_at, r.rowid) <= (?, ?)"
            " ORDER BY r.started_at, r.rowid, e.seq LIMIT ?",
            (session_id, first["started_at"], first["rid"], after_seq, last["started_at"], last["rid"], limit),
        )

    async def _replay_ended(self, run_id: str) -> None:
        """The run has ended (its done is stored): keep its folded replay, so a reopen need not fold it."""
        try:
            await self._store_replay(run_id)
        except AstroError as exc:  # the events are stored; a reopen folds them itself
            log.warning("could not store the replay of run %s: %s", run_id, exc)

    async def _store_replay(self, run_id: str) -> None:
        """Fold the run's stored events once and keep them as its replay (see ``session_events``)."""
        rows = await self.db.fetchall(
            f"SELECT run_id, seq, created_at, type, data, {_DELTA_FIELDS_SQL} FROM agent_events WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
        if not rows:
            return
        folded = fold_event_rows(tuple(r.values()) for r in rows)
        await self.db.execute(
            "INSERT OR REPLACE INTO agent_run_replay (run_id, last_seq, events) VALUES (?, ?, ?)",
            (run_id, rows[-1]["seq"],
             safe_json([{"run_id": run_id, "seq": seq, "time": created, "event": data} for _, seq, created, data in folded])),
        )

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


_DELTA_TYPES = ("text_delta", "thinking_delta")
_DELTA_TYPES_SQL = "('text_delta', 'thinking_delta')"
# a delta row's text, step and subagent pulled out by SQLite, so Python parses only the rows it keeps
_DELTA_FIELDS_SQL = (
    f"CASE WHEN type IN {_DELTA_TYPES_SQL} THEN json_extract(data, '$.delta') END AS delta,"
    f" CASE WHEN type IN {_DELTA_TYPES_SQL} THEN json_extract(data, '$.step') END AS step,"
    f" CASE WHEN type IN {_DELTA_TYPES_SQL} THEN json_extract(data, '$.subagent_id') END AS sub"
)


def _replay_current(run: Row) -> bool:
    """Whether a run's stored replay covers every event stored for it."""
    return run["events"] is not None and run["last_seq"] == run["max_seq"]


def fold_event_rows(
    rows: Iterable[tuple[str, int, str, str, str, Any, Any, Any]],
) -> list[tuple[str, int, str, dict[str, Any]]]:
    """Merge consecutive ``text_delta`` / ``thinking_delta`` rows of one run with the same type,
    step and subagent into one event, the deltas joined. Rows are ``(run_id, seq, created_at,
    type, data-json, delta, step, subagent_id)`` (the last three pulled out by SQLite for delta
    rows). The merged event is the group's first event with the joined delta and carries the
    seq and time of the group's last row, so a consumer deduping by seq stays right.

    Why: a reopened session replays thousands of deltas; applied one by one or folded, a
    consumer builds the same text, and the folded list is much shorter. Only the rows that are
    kept (the first of a group, every other event) have their JSON parsed."""
    out: list[tuple[str, int, str, dict[str, Any]]] = []
    parts: list[str] = []
    group: tuple[Any, ...] | None = None  # (run_id, type, step, subagent) of the open group

    def close() -> None:
        if len(parts) > 1:
            run_id, seq, created, data = out[-1]
            out[-1] = (run_id, seq, created, {**data, "delta": "".join(parts)})
        parts.clear()

    for run_id, seq, created, kind, raw, delta, step, sub in rows:
        if kind in _DELTA_TYPES and isinstance(delta, str):
            key = (run_id, kind, step, sub)
            if parts and key == group:
                parts.append(delta)
                out[-1] = (run_id, seq, created, out[-1][3])
                continue
            close()
            data = json.loads(raw)
            if data.get("type") == kind:
                group = key
                parts.append(delta)
                out.append((run_id, seq, created, data))
                continue
            out.append((run_id, seq, created, data))  # a row whose type column disagrees: as it is
            group = None
            continue
        close()
        group = None
        out.append((run_id, seq, created, json.loads(raw)))
    close()
    return out
