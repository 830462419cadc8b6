"""Full-text search over past sessions (titles, summaries) and their messages (FTS5).

Shared by the ``search_history`` tool and the server's ``GET astro/api/search/history``.
Snippets mark matched terms with ``«`` and ``»`` (plain text, safe to show to the model);
``snippet_to_html`` escapes a snippet and turns the markers into ``<mark>`` for a browser.

User text is never passed to ``MATCH`` raw: FTS5 has its own query syntax (``AND``, ``NEAR``,
``"``, ``*``, column filters) in which ordinary text like ``M31 - halo`` is a syntax error.
``fts_query`` keeps the words (dropping bare AND/OR/NOT), quotes each one, and lets a trailing ``*`` mean a prefix.
"""

from __future__ import annotations

import html
import re
from typing import Any

from .db import Database, Row

MARK_START = "«"
MARK_END = "»"
ELLIPSIS = "…"

_OPERATORS = {"AND", "OR", "NOT"}  # FTS5 operators typed by a user are dropped, not searched for
_WORD = re.compile(r"[\w][\w.+-]*\*?", re.UNICODE)


def fts_query(text: str) -> str:
    """An FTS5 expression matching all words of ``text`` (implicit AND); '' when it has none."""
    terms: list[str] = []
    for raw in _WORD.findall(text or ""):
        prefix = raw.endswith("*")
        word = raw.rstrip("*").strip(".+-")
        if not word or word in _OPERATORS:
            continue
        quoted = '"' + word.replace('"', '""') + '"'
        terms.append(quoted + ("*" if prefix else ""))
    return " ".join(terms)


def snippet_to_html(snippet: str) -> str:
    """HTML-escape a snippet, then show its «matches» as <mark>matches</mark>."""
    escaped = html.escape(snippet, quote=False)
    return escaped.replace(MARK_START, "<mark>").replace(MARK_END, "</mark>")


class HistorySearch:
    """``search(query, session_id=None, limit=20)`` → hits, best first (lower ``rank`` is better).

    Each hit: ``session_id``, ``session_title``, ``message_id`` (None for a title/summary hit),
    ``run_id``, ``role`` ("session" for a title/summary hit), ``snippet`` (with «» markers), ``rank`` (bm25),
    ``created_at``.
    """

    def __init__(self, db: Database, *, snippet_tokens: int = 16) -> None:
        self.db = db
        self.snippet_tokens = snippet_tokens

    async def search(
        self, query: str, session_id: str | None = None, limit: int = 20, *, exclude_run_id: str = "",
        owner: str | None = None,
    ) -> list[dict[str, Any]]:
        """``exclude_run_id`` leaves out the messages of one run (the agent's own current question).
        ``owner`` (None: everyone's, for the local user's kernel and CLI) keeps the sessions of that
        owner and the ownerless ones, in SQL, so another owner's many hits cannot crowd them out."""
        match = fts_query(query)
        if not match:
            return []
        limit = max(1, min(int(limit), 200))
        hits = (await self._messages(match, session_id, limit, exclude_run_id, owner)
                + await self._sessions(match, session_id, limit, owner))
        hits.sort(key=lambda h: (h["rank"], -(h["message_id"] or 0)))
        return hits[:limit]

    async def _messages(
        self, match: str, session_id: str | None, limit: int, exclude_run_id: str = "", owner: str | None = None
    ) -> list[dict[str, Any]]:
        sql = (
            "SELECT m.id AS message_id, m.session_id, m.run_id, m.role, m.created_at, s.title AS session_title,"
            f" snippet(agent_messages_fts, 0, ?, ?, ?, {int(self.snippet_tokens)}) AS snippet,"
            " bm25(agent_messages_fts) AS rank"
            " FROM agent_messages_fts"
            " JOIN agent_messages m ON m.id = agent_messages_fts.rowid"
            " JOIN agent_sessions s ON s.id = m.session_id"
            " WHERE agent_messages_fts MATCH ?"
        )
        rows = await self._ranked(sql, match, limit, [("m.session_id = ?", session_id), ("m.run_id != ?", exclude_run_id)],
                                  owner)
        return [_hit(r, message_id=r["message_id"], run_id=r["run_id"], role=r["role"]) for r in rows]

    async def _sessions(self, match: str, session_id: str | None, limit: int, owner: str | None = None) -> list[dict[str, Any]]:
        sql = (
            "SELECT s.id AS session_id, s.title AS session_title, s.updated_at AS created_at,"
            f" snippet(agent_sessions_fts, -1, ?, ?, ?, {int(self.snippet_tokens)}) AS snippet,"
            " bm25(agent_sessions_fts) AS rank"
            " FROM agent_sessions_fts"
            " JOIN agent_sessions s ON s.rowid = agent_sessions_fts.rowid"
            " WHERE agent_sessions_fts MATCH ?"
        )
        rows = await self._ranked(sql, match, limit, [("s.id = ?", session_id)], owner)
        return [_hit(r, message_id=None, run_id="", role="session") for r in rows]

    async def _ranked(
        self, sql: str, match: str, limit: int, filters: list[tuple[str, str | None]], owner: str | None = None
    ) -> list[Row]:
        """Run an FTS query (snippet marks + MATCH first), adding each filter whose value is set
        and, for an ``owner``, the visibility rule (its own sessions and ownerless ones)."""
        params: list[Any] = [MARK_START, MARK_END, ELLIPSIS, match]
        for clause, value in filters:
            if value:
                sql += f" AND {clause}"
                params.append(value)
        if owner is not None:
            sql += " AND s.owner IN ('', ?)"
            params.append(owner)
        sql += " ORDER BY rank LIMIT ?"
        params.append(limit)
        return await self.db.fetchall(sql, params)


def _hit(r: Row, *, message_id: int | None, run_id: str, role: str) -> dict[str, Any]:
    return {
        "session_id": r["session_id"],
        "session_title": r["session_title"],
        "message_id": message_id,
        "run_id": run_id,
        "role": role,
        "snippet": r["snippet"],
        "rank": float(r["rank"]),
        "created_at": r["created_at"],
    }
