"""Sessions: list, create, rename, coordinator mode, delete, history, export — with ownership."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Iterator

from ..errors import InvalidRequest, PermissionDenied, RunConflict, RunNotFound, SessionNotFound
from ..textsafe import safe_json
from .common import AppBase, Owner, may_change, visible_to

if TYPE_CHECKING:
    from ..export import ResearchLog
    from ..store.sessions import SessionRecord

TITLE_MAX = 200
REPLAY_PAGE_EVENTS = 50_000  # stored events per page when a session is reopened (text deltas folded first)
# about this many characters per line of GET sessions/{id}/history: small lines, so the browser parses
# the reply a little at a time between frames instead of in one long main-thread task (2 MB of JSON
# in one JSON.parse: ~80 ms here)
HISTORY_LINE_CHARS = 64_000


class SessionsMixin(AppBase):
    async def session(self, owner: Owner, session_id: str, *, change: bool = False) -> "SessionRecord":
        """The session if ``owner`` may see it; else SessionNotFound (never "forbidden": ids do not leak).
        With ``change``, a visible session of another identity (an ownerless one) is PermissionDenied."""
        record = await self.services.sessions.find(session_id)
        if record is None or not visible_to(record.owner, owner):
            raise SessionNotFound(f"no session {session_id!r}")
        if change and not may_change(record.owner, owner):
            raise PermissionDenied(
                f"session {session_id!r} belongs to the server's shared identity (the kernel, the CLI, the token "
                "login): you can read it but not change it or continue it; start a new session"
            )
        return record

    async def list_sessions(
        self, owner: Owner, *, limit: int = 200, offset: int = 0, detail: bool = True
    ) -> list[dict[str, Any]]:
        """Newest first; ``detail`` adds turns and last model, in one query (what the sidebar lists)."""
        if not detail:
            return [r.to_dict() for r in await self.services.sessions.list(owner=owner, limit=limit, offset=offset)]
        rows = await self.services.sessions.list_summaries(owner=owner, limit=limit, offset=offset)
        return [{**self._session_dict(r), "turns": turns, "last_model": model} for r, turns, model in rows]

    async def create_session(self, owner: str, *, title: str = "") -> dict[str, Any]:
        record = await self.services.sessions.create(title=_title(title), owner=owner, source=self.source)
        return self._session_dict(record)

    async def get_session(self, owner: Owner, session_id: str) -> dict[str, Any]:
        record = await self.session(owner, session_id)
        out = self._session_dict(record)
        runs = await self.services.runs.list_for_session(session_id)
        out["runs"] = [r.to_dict() for r in runs]
        out["usage"] = session_usage(await self.services.runs.usage_events(session_id))
        return out

    async def update_session(
        self, owner: Owner, session_id: str, *, title: Any = None, coordinator: Any = None
    ) -> dict[str, Any]:
        """Rename and/or set coordinator mode; the flag lives on the session so every tab,
        the kernel and the next run see the same mode (not a per-browser setting)."""
        fields: dict[str, Any] = {}
        if title is not None:
            fields["title"] = _title(title)
        if coordinator is not None:
            fields["coordinator"] = _coordinator(coordinator)
        if not fields:
            raise InvalidRequest('PATCH takes {"title": "...", "coordinator": true|false} (at least one)')
        await self.session(owner, session_id, change=True)
        return self._session_dict(await self.services.sessions.update(session_id, **fields))

    async def delete_session(self, owner: Owner, session_id: str) -> None:
        await self.session(owner, session_id, change=True)
        active = self.active_run_id(session_id)
        if active:
            raise RunConflict(f"session {session_id!r} has a running run ({active}); cancel it first")
        await self.services.sessions.delete(session_id)

    async def session_messages(self, owner: Owner, session_id: str) -> list[dict[str, Any]]:
        await self.session(owner, session_id)
        return [m.to_dict() for m in await self.services.messages.list(session_id)]

    async def session_events(
        self, owner: Owner, session_id: str, *, cursor: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """A page of the stored events of the session's runs (runs in start order), consecutive
        text deltas folded, so the sidebar can replay a reopened session through its live path.
        ``next_cursor`` (``run_id/seq`` of the page's last raw event) continues; None at the end."""
        await self.session(owner, session_id)
        after_run, after_seq = None, 0
        if cursor:
            after_run, _, raw_seq = cursor.rpartition("/")
            record = None
            if after_run and raw_seq.isdigit():
                try:
                    record = await self.services.runs.get(after_run)
                except RunNotFound:
                    record = None
            if record is None or record.session_id != session_id:
                raise InvalidRequest("'cursor' must be the next_cursor of an earlier page of this session", reason="invalid_cursor")
            after_seq = int(raw_seq)
        await self.settle_session(session_id)
        page = max(1, int(limit or REPLAY_PAGE_EVENTS))
        folded, after = await self.services.runs.session_events(
            session_id, after_run=after_run, after_seq=after_seq, limit=page
        )
        events = [{"run_id": run_id, "seq": seq, "time": created, "event": data} for run_id, seq, created, data in folded]
        next_cursor = f"{after[0]}/{after[1]}" if after is not None else None
        return {"session_id": session_id, "events": events, "next_cursor": next_cursor}

    async def session_history(self, owner: Owner, session_id: str) -> AsyncIterator[str]:
        """Everything a reopened sidebar needs, in one reply, as lines of JSON text:
        ``{"session": ...}`` (as ``get_session``) first, then ``{"messages": [...]}`` lines (every
        message, in order, brief: ``MessageRepository.brief_json``), then ``{"events": [...]}``
        lines (every event ``session_events`` pages through, in order), each line about
        ``HISTORY_LINE_CHARS`` long (a run's events stay on one line).

        Why one reply of lines: three replies (session, full messages, events) cost the server three
        reads that queued behind each other and the browser two ~2 MB ``JSON.parse`` calls, each a
        main-thread task well over 50 ms. The lines are built from JSON text SQLite made or stored
        (a run's replay), so the server neither parses nor re-encodes the bulk of it."""
        yield safe_json({"session": await self.get_session(owner, session_id)})  # raises first if not visible
        for line in _json_lines("messages", await self.services.messages.brief_json(session_id)):
            yield line
        await self.settle_session(session_id)
        for line in _json_lines("events", await self.services.runs.session_events_json(session_id)):
            yield line

    async def settle_session(self, session_id: str) -> None:
        """Wait until the events of this session's finished runs are all in the store.

        A run's ``done`` reaches watchers before the event bus has written its last batch, so
        a client that exports right after ``done`` could otherwise read a store without them.
        """
        if self._runtime is None:
            return
        for record in await self.services.runs.list_for_session(session_id):
            handle = self._runtime.get_run(record.id)
            if handle is not None and handle.finished:
                await handle.bus.aclose()

    # -- export ------------------------------------------------------------------------------
    async def export_session(self, owner: Owner, session_id: str) -> tuple["SessionRecord", Any]:
        """The session and its research-log notebook (an ``nbformat`` node), all events settled."""
        from ..export import export_session

        record = await self.session(owner, session_id)
        await self.settle_session(session_id)
        return record, await export_session(self.services, session_id)

    async def write_session_notebook(self, owner: Owner, session_id: str, path: str | Path) -> "ResearchLog":
        """Write the research log to ``path`` and its BibTeX beside it (SessionNotFound for an unknown
        id, OSError on I/O)."""
        from ..export import write_research_log

        if owner is not None:
            await self.session(owner, session_id)
        await self.settle_session(session_id)
        return await write_research_log(self.services, session_id, path)

    def _session_dict(self, record: "SessionRecord") -> dict[str, Any]:
        out = record.to_dict()
        out["active_run_id"] = self.active_run_id(record.id)
        return out

    def active_run_id(self, session_id: str) -> str | None:
        """The live run of a session in this process, if any (a second tab reattaches to it)."""
        if self._runtime is None:
            return None
        handle = self._runtime.active_run_for(session_id)
        return None if handle is None else str(handle.run_id)


def _json_lines(key: str, pieces: list[str]) -> Iterator[str]:
    """``{"<key>": [...]}`` lines of about ``HISTORY_LINE_CHARS``, the pieces (JSON values, or
    several joined by commas) in order; none when there are no pieces."""
    chunk: list[str] = []
    size = 0
    for piece in pieces:
        chunk.append(piece)
        size += len(piece)
        if size >= HISTORY_LINE_CHARS:
            yield f'{{"{key}":[{",".join(chunk)}]}}'
            chunk, size = [], 0
    if chunk:
        yield f'{{"{key}":[{",".join(chunk)}]}}'


def _title(title: Any) -> str:
    if title is None:
        return ""
    if not isinstance(title, str):
        raise InvalidRequest("'title' must be a string", reason="invalid_title")
    title = " ".join(title.split())
    if len(title) > TITLE_MAX:
        raise InvalidRequest(f"'title' is longer than {TITLE_MAX} characters", reason="invalid_title")
    return title


def _coordinator(value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequest("'coordinator' must be true or false", reason="invalid_coordinator")
    return value


def session_usage(events: list[dict[str, Any]]) -> dict[str, Any]:
    """A session's total from its runs' ``usage`` events: tokens, and the cost of the priced runs
    (``unpriced_runs`` says how many had no ``llm_prices`` entry, so a partial sum is not passed off
    as the whole)."""
    total: dict[str, Any] = {"runs": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": None, "unpriced_runs": 0}
    for event in events:
        if event.get("subagent_id"):
            continue
        total["runs"] += 1
        total["prompt_tokens"] += int(event.get("prompt_tokens") or 0)
        total["completion_tokens"] += int(event.get("completion_tokens") or 0)
        cost = event.get("cost_usd")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            total["cost_usd"] = round((total["cost_usd"] or 0.0) + float(cost), 6)
        else:
            total["unpriced_runs"] += 1
    return total
