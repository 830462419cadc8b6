"""One outside agent's tool call stored as a finished session: session, run, events, messages and the
call's audit rows in one transaction and one trip to the database thread (``astro-jupyter mcp``
answers each call only after this commit; a trip per row, or a commit for the audit row and another
for the session, was most of a call's cost on a busy machine)."""

from __future__ import annotations

from typing import Any

from ..textsafe import clean_text, safe_json
from .audit import INSERT as _INSERT_AUDIT
from .db import Database, _sync_in_transaction
from .messages import _INSERT as _INSERT_MESSAGE, _row_values

_INSERT_SESSION = "INSERT INTO agent_sessions (id, title, owner, model, source) VALUES (?, ?, ?, ?, ?)"
_INSERT_RUN = (
    "INSERT INTO agent_runs (id, session_id, owner, prompt, model, status, finished_at)"
    " VALUES (?, ?, ?, ?, ?, 'finished', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
)
_INSERT_EVENT = "INSERT INTO agent_events (run_id, seq, type, data) VALUES (?, ?, ?, ?)"
_RESERVE = "INSERT INTO agent_run_seq (run_id, reserved) VALUES (?, ?)"


def _write(conn: Any, session: tuple[Any, ...], run: tuple[Any, ...], events: list[dict[str, Any]],
           messages: list[tuple[Any, ...]], audit: list[tuple[Any, ...]]) -> None:
    if audit:
        conn.executemany(_INSERT_AUDIT, audit).close()
    conn.execute(_INSERT_SESSION, session).close()
    conn.execute(_INSERT_RUN, run).close()
    run_id = run[0]
    conn.executemany(_INSERT_EVENT, [(run_id, seq, clean_text(str(e.get("type", ""))), safe_json(e))
                                     for seq, e in enumerate(events, 1)]).close()
    conn.execute(_RESERVE, (run_id, len(events))).close()
    conn.executemany(_INSERT_MESSAGE, messages).close()


async def record_call(db: Database, *, session_id: str, run_id: str, title: str, owner: str, source: str,
                      events: list[dict[str, Any]], messages: list[dict[str, Any]],
                      audit: list[tuple[Any, ...]] | None = None) -> None:
    """Store the call (all or nothing); ``events`` are wire dicts, numbered from 1; ``audit`` are rows
    the executor recorded while ``AuditRepository.held`` kept them back."""
    rows = [_row_values(session_id, run_id, m, None) for m in messages]
    await db.run_sync(_sync_in_transaction, _write, (session_id, clean_text(title), owner, "", source),
                      (run_id, session_id, owner, clean_text(title), source), events, rows, list(audit or ()))
