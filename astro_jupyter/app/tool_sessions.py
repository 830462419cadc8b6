"""A tool call made by an outside agent (through ``astro-jupyter mcp``), kept as a session of its own.

Another agent's call is work done on the user's library, so it is recorded like a run: a session
(``source`` names the front end), one run whose prompt says what was called, its ``tool_call`` /
``tool_result`` / ``done`` events and the matching messages. It then appears in the sidebar's
history, in history search, and exports to a research-log notebook like any other run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any, Coroutine

from ..errors import StoreError
from ..events import Done, ToolCall, ToolResult
from ..store.sessions import new_id
from .common import AppBase
from .tools import ToolRun

if TYPE_CHECKING:
    from ..agent.permissions import Unattended

log = logging.getLogger(__name__)

TITLE_ARGS_CHARS = 80  # the arguments shown in the session's title


def call_title(prefix: str, name: str, arguments: dict[str, Any]) -> str:
    """``MCP search_papers: {"query": "M 31"}``: one line, bounded."""
    shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True) if arguments else ""
    if len(shown) > TITLE_ARGS_CHARS:
        shown = shown[: TITLE_ARGS_CHARS - 1] + "…"
    return " ".join(f"{prefix} {name}: {shown}".split()) if shown else f"{prefix} {name}"


class ToolSessionsMixin(AppBase):
    async def run_tool_as_session(
        self, name: str, arguments: dict[str, Any], *, source: str, title_prefix: str, owner: str = ""
    ) -> tuple[ToolRun, str]:
        """Run one tool through the executor (no one to answer: Ask is denied), then store the call as
        a new finished session; returns the outcome and the session id."""
        run, session_id, store = await self.run_tool_for_session(
            name, arguments, source=source, title_prefix=title_prefix, owner=owner)
        await store
        return run, session_id

    async def run_tool_for_session(
        self, name: str, arguments: dict[str, Any], *, source: str, title_prefix: str, owner: str = "",
        unattended: "Unattended | None" = None,
    ) -> tuple[ToolRun, str, Coroutine[Any, Any, None]]:
        """``run_tool_as_session`` in two steps: the run, then ``store`` (the third value, to be awaited
        once), which writes the session with the executor's audit rows in one transaction. The caller
        picks when: ``astro-jupyter mcp`` stores a read-only call after answering it (mcp/server.py).
        ``unattended``: how a question is refused (why no one can answer, how to allow the call)."""
        title = call_title(title_prefix, name, arguments)
        session_id, run_id = new_id("ses"), new_id("run")
        with self.services.audit.held() as held:
            try:
                run = await self.run_tool(name, arguments, session_id=session_id, run_id=run_id,
                                          unattended=unattended)
            except BaseException:  # cancelled mid-call: no session, but the audit rows are kept
                await _keep_audit(self.services.db, held.rows)
                raise
        args = run.arguments if run.arguments is not None else arguments
        events = [
            ToolCall(id=run.call_id, name=name, arguments=args, step=1),
            ToolResult(tool_call_id=run.call_id, name=name, output=run.content, is_error=run.is_error,
                       metadata=run.metadata, step=1, duration_ms=run.duration_ms),
            Done(session_id=session_id, run_id=run_id, reason="finished"),  # a tool's error ends the run normally
        ]
        messages = [
            {"role": "user", "content": title},
            {"role": "assistant", "content": "", "tool_calls": [{"id": run.call_id, "type": "function", "function": {
                "name": name, "arguments": json.dumps(args, ensure_ascii=False)}}]},
            {"role": "tool", "tool_call_id": run.call_id, "name": name, "content": run.content},
        ]
        wire = [e.to_wire() for e in events]

        async def store() -> None:
            from ..store.recorded_calls import record_call

            try:  # shielded: a call that ran is stored even when its caller gives up now
                await asyncio.shield(record_call(
                    self.services.db, session_id=session_id, run_id=run_id, title=title, owner=owner,
                    source=source, events=wire, messages=messages, audit=held.rows))
            except StoreError:  # the session could not be stored: the audit rows still are, if the store lets them
                await _keep_audit(self.services.db, held.rows)
                raise

        return run, session_id, store()


async def _keep_audit(db: Any, rows: list[tuple[Any, ...]]) -> None:
    """Write audit rows ``held`` kept back, on their own (shielded from a second cancellation)."""
    from ..store.audit import INSERT

    if not rows:
        return
    try:
        await asyncio.shield(db.write_many(INSERT, rows))
    except StoreError as exc:  # the error being raised says more than this one
        log.warning("audit rows of a tool call could not be written: %s", exc)
