"""Messages of a session in the OpenAI chat shape, stored one row each, in order."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..textsafe import clean_text, safe_json
from .db import Database, Row


@dataclass
class MessageRecord:
    id: int
    session_id: str
    run_id: str
    role: str
    content: str
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    compacted: bool = False
    created_at: str = ""

    @classmethod
    def from_row(cls, row: Row) -> "MessageRecord":
        return cls(
            id=row["id"],
            session_id=row["session_id"],
            run_id=row["run_id"],
            role=row["role"],
            content=row["content"],
            tool_calls=json.loads(row["tool_calls"]) if row["tool_calls"] else None,
            tool_call_id=row["tool_call_id"],
            name=row["name"],
            metadata=json.loads(row["metadata"] or "{}"),
            compacted=bool(row["compacted"]),
            created_at=row["created_at"],
        )

    def to_chat(self) -> dict[str, Any]:
        """The message as the chat-completions API wants it. A prompt's ``context`` (the note about the
        open notebook the model was given) is stored apart from what the user typed, and joined
        back here: the model sees what it saw then, the user's bubble and search only the words."""
        content = self.content
        if self.role == "user" and isinstance(self.metadata.get("context"), str):
            content += self.metadata["context"]
        msg: dict[str, Any] = {"role": self.role, "content": content}
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        if self.tool_call_id:
            msg["tool_call_id"] = self.tool_call_id
        if self.name and self.role == "tool":
            msg["name"] = self.name
        return msg

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _row_values(session_id: str, run_id: str, message: dict[str, Any], metadata: dict[str, Any] | None) -> tuple:
    """Text SQLite cannot encode (lone surrogates from a model or a file name) is stored cleaned, not refused."""
    tool_calls = message.get("tool_calls")
    call_id, name = message.get("tool_call_id"), message.get("name")
    return (
        session_id,
        run_id,
        message["role"],
        clean_text(str(message.get("content") or "")),
        safe_json(tool_calls, compact=False) if tool_calls else None,
        clean_text(str(call_id)) if call_id is not None else None,
        clean_text(str(name)) if name is not None else None,
        safe_json(metadata or {}, compact=False),
    )


_INSERT = (
    "INSERT INTO agent_messages (session_id, run_id, role, content, tool_calls, tool_call_id, name, metadata)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


class MessageRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def append(
        self, session_id: str, message: dict[str, Any], *, run_id: str = "", metadata: dict[str, Any] | None = None
    ) -> int:
        return await self.db.execute(_INSERT, _row_values(session_id, run_id, message, metadata))

    async def append_many(self, session_id: str, messages: list[dict[str, Any]], *, run_id: str = "") -> None:
        """All or nothing: a turn's assistant message and its tool results land together.

        One transaction and one trip to the database thread (``write_many``): this runs
        once per agent turn.
        """
        await self.db.write_many(_INSERT, [_row_values(session_id, run_id, m, None) for m in messages])

    async def list(self, session_id: str, *, include_compacted: bool = True) -> list[MessageRecord]:
        sql = "SELECT * FROM agent_messages WHERE session_id = ?"
        if not include_compacted:
            sql += " AND compacted = 0"
        rows = await self.db.fetchall(sql + " ORDER BY id", (session_id,))
        return [MessageRecord.from_row(r) for r in rows]

    async def brief_json(self, session_id: str) -> list[str]:
        """The session's messages as a reopened sidebar links them to what it replays, each as JSON
        text made by SQLite: ids, roles, runs and times, the words of prompts and answers, the ids of
        tool calls; no tool output, call arguments or metadata (the replayed events carry what is
        shown). Why: the full rows of a 5,000-message session are ~2 MB the browser would parse on
        its main thread for nothing, and building them in Python cost the server tens of ms more."""
        rows = await self.db.fetchall(
            "SELECT json_object('id', id, 'session_id', session_id, 'run_id', run_id, 'role', role,"
            " 'content', CASE WHEN role = 'tool' THEN '' ELSE content END,"
            " 'tool_calls', CASE WHEN tool_calls IS NULL THEN NULL ELSE"
            "  (SELECT json_group_array(json_object('id', json_extract(c.value, '$.id'))) FROM json_each(tool_calls) c) END,"
            " 'tool_call_id', tool_call_id, 'created_at', created_at) AS brief"
            " FROM agent_messages WHERE session_id = ? ORDER BY id",
            (session_id,),
        )
        return [r["brief"] for r in rows]

    async def chat_history(self, session_id: str) -> list[dict[str, Any]]:
        return [m.to_chat() for m in await self.list(session_id, include_compacted=False)]

    async def has_compacted(self, session_id: str) -> bool:
        """Whether a compaction replaced some of the session's messages by its summary."""
        return bool(
            await self.db.fetchval(
                "SELECT 1 FROM agent_messages WHERE session_id = ? AND compacted = 1 LIMIT 1", (session_id,)
            )
        )

    async def mark_compacted(self, session_id: str, up_to_id: int) -> int:
        return await self.db.execute_rowcount(
            "UPDATE agent_messages SET compacted = 1 WHERE session_id = ? AND id <= ? AND compacted = 0",
            (session_id, up_to_id),
        )
