"""``AstroService``: everything the HTTP handlers do, without HTTP.

The handlers only parse requests and write responses; the decisions (who owns a session,
where a run's events come from, what a prompt may be) live here, so they can be tested
and reused without tornado. This module imports nothing from Jupyter or tornado.

Ownership: sessions and runs carry the ``owner`` that created them. An owner sees its own
rows and ownerless ones (made by the kernel magics or the CLI, which have no web identity);
anything else answers "not found", never "forbidden", so ids do not leak.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

from ..config import AstroConfig
from ..errors import (  # noqa: F401 - InvalidRequest, NotAvailable, RateLimited re-exported for old imports
    AstroError,
    ConfigError,
    InvalidRequest,
    NotAvailable,
    RateLimited,
    RunConflict,
    RunNotFound,
    SessionNotFound,
)
from ..services.container import ServiceContainer
from ..textsafe import safe_json
from .sse_batches import Batch, coalesce_stored, live_batches

if TYPE_CHECKING:
    from ..store.runs import RunRecord
    from ..store.sessions import SessionRecord

log = logging.getLogger(__name__)

STORE_PAGE = 500
STORE_POLL_SECS = 0.25
TITLE_MAX = 200


def _can_see(row_owner: str, owner: str) -> bool:
    return row_owner in ("", owner)


def encode_wire(data: dict[str, Any]) -> str:
    """Compact JSON without raw newlines (safe as one SSE ``data:`` line), always UTF-8 encodable."""
    return safe_json(data)


class AstroService:
    """One per server: owns the ``ServiceContainer``, the ``AgentRuntime`` and the intake worker."""

    def __init__(
        self,
        config: AstroConfig,
        *,
        runtime_factory: Callable[[ServiceContainer], Any] | None = None,
    ) -> None:
        self.config = config
        self.services = ServiceContainer(config)
        self._runtime_factory = runtime_factory
        self._runtime: Any = None
        self._started = False
        self._start_lock = asyncio.Lock()
        self._closed = False
        self._services_closed = False
        self.intake: Any = None  # IntakeWorker, built in start()
        self._warm: asyncio.Task[None] | None = None
        # PUT models/current: each owner's choice for its next runs (the endpoint's client is shared)
        self._owner_models: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> "AstroService":
        """Open the store (idempotent; every handler awaits it, the first one does the work)."""
        if self._started:
            return self
        async with self._start_lock:
            if self._started:
                return self
            if self._closed:
                raise AstroError("the astro service has been stopped")
            await self.services.start()
            from .intake import IntakeWorker

            try:
                runtime = self.runtime
            except (ValueError, TypeError) as exc:  # e.g. a malformed permission rule or hook
                raise ConfigError(f"the astro configuration is invalid: {exc}") from exc
            await runtime.start()  # runs a dead server left 'running' become 'error'
            self.intake = IntakeWorker(self.services)
            await self.intake.start()
            if self.config.llm_configured:  # import openai off the loop: the first run need not stall
                self._warm = asyncio.create_task(asyncio.to_thread(_import_llm_client))
            self._started = True
        return self

    @property
    def runtime(self) -> Any:
        """The agent runtime, built on first use so a server without an LLM still serves history."""
        if self._runtime is None:
            if self._runtime_factory is not None:
                self._runtime = self._runtime_factory(self.services)
            else:
                from ..agent.runtime import AgentRuntime

                self._runtime = AgentRuntime(self.services)
        return self._runtime

    async def close(self) -> None:
        """Cancel live runs, stop the intake worker, close the store."""
        self._closed = True
        if self.intake is not None:
            await self.intake.stop()
        if self._runtime is not None:
            try:
                await self._runtime.close()
                # runtime.close() waits for active runs; a run that just sent ``done`` may still be
                # writing its last events, and those must land before the store closes
                tasks = [h.task for h in list(getattr(self._runtime, "_runs", {}).values()) if h.task is not None]
                if tasks:
                    await asyncio.wait(tasks, timeout=30)
            except Exception:  # noqa: BLE001 - shutdown must reach the database
                log.exception("closing the agent runtime failed")
            self._runtime = None
        if not self._services_closed:  # also after a failed start: the store may be open
            self._services_closed = True
            await self.services.close()
        self._started = False

    # -- sessions --------------------------------------------------------------------------
    async def session(self, owner: str, session_id: str) -> "SessionRecord":
        record = await self.services.sessions.find(session_id)
        if record is None or not _can_see(record.owner, owner):
            raise SessionNotFound(f"no session {session_id!r}")
        return record

    async def list_sessions(self, owner: str, *, limit: int = 200, offset: int = 0) -> list[dict[str, Any]]:
        rows = await self.services.sessions.list_summaries(owner=owner, limit=limit, offset=offset)
        return [{**self._session_dict(r), "turns": turns, "last_model": model} for r, turns, model in rows]

    async def create_session(self, owner: str, *, title: str = "") -> dict[str, Any]:
        record = await self.services.sessions.create(title=_title(title), owner=owner, source="sidebar")
        return self._session_dict(record)

    async def get_session(self, owner: str, session_id: str) -> dict[str, Any]:
        record = await self.session(owner, session_id)
        out = self._session_dict(record)
        runs = await self.services.runs.list_for_session(session_id)
        out["runs"] = [r.to_dict() for r in runs]
        return out

    async def rename_session(self, owner: str, session_id: str, title: str) -> dict[str, Any]:
        return await self.update_session(owner, session_id, title=title)

    async def update_session(
        self, owner: str, session_id: str, *, title: Any = None, coordinator: Any = None
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
        await self.session(owner, session_id)
        return self._session_dict(await self.services.sessions.update(session_id, **fields))

    async def delete_session(self, owner: str, session_id: str) -> None:
        await self.session(owner, session_id)
        active = self.active_run_id(session_id)
        if active:
            raise RunConflict(f"session {session_id!r} has a running run ({active}); cancel it first")
        await self.services.sessions.delete(session_id)

    async def session_messages(self, owner: str, session_id: str) -> list[dict[str, Any]]:
        await self.session(owner, session_id)
        return [m.to_dict() for m in await self.services.messages.list(session_id)]

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

    # -- history search ----------------------------------------------------------------------
    async def search_history(
        self, owner: str, query: str, *, session_id: str | None = None, limit: int = 20, cursor: str | None = None
    ) -> dict[str, Any]:
        """A page of hits over the sessions ``owner`` may see, and the cursor of the next page ("more results")."""
        from ..store.history import InvalidCursor, snippet_to_html

        if session_id:
            await self.session(owner, session_id)
        try:
            page = await self.services.history.search_page(
                query, session_id=session_id, limit=limit, owner=owner, cursor=cursor
            )
        except InvalidCursor as exc:
            raise InvalidRequest(str(exc), reason="invalid_cursor") from exc
        results = [{**hit, "snippet_html": snippet_to_html(hit["snippet"])} for hit in page.hits]
        return {"results": results, "next_cursor": page.next_cursor, "window": page.window}

    # -- runs ----------------------------------------------------------------------------------
    def check_prompt(self, prompt: Any) -> str:
        if not isinstance(prompt, str) or not prompt.strip():
            raise InvalidRequest("'prompt' must be a non-empty string", reason="invalid_prompt")
        if len(prompt) > self.config.max_prompt_chars:
            raise InvalidRequest(
                f"the prompt has {len(prompt)} characters; the limit is {self.config.max_prompt_chars}"
                " (AstroConfig.max_prompt_chars)",
                reason="prompt_too_long",
                status=413,
            )
        return prompt

    async def start_run(
        self,
        owner: str,
        prompt: Any,
        *,
        session_id: str | None = None,
        model: str | None = None,
        coordinator: bool | None = None,
        max_steps: int | None = None,
        notebook: Any = None,
    ) -> dict[str, str]:
        """Start a run. ``coordinator=None`` means "the session's stored mode"; an explicit
        value wins and becomes the session's mode (restored if the run cannot start).
        ``notebook`` is the sidebar's active notebook (``notebook_context.py``)."""
        prompt = self.check_prompt(prompt)
        from .notebook_context import parse_notebook_context

        client, context_note = parse_notebook_context(notebook, self.services)
        extra = {"notebook_client": client, "prompt_context": context_note} if client is not None else None
        previous: bool | None = None
        if session_id:
            record = await self.session(owner, session_id)
            if coordinator is None:
                coordinator = record.coordinator
            elif coordinator != record.coordinator:
                # stored first: the runtime ORs the argument with the stored flag
                previous = record.coordinator
                await self.services.sessions.update(session_id, coordinator=coordinator)
        try:
            handle = await self.runtime.start_run(
                prompt,
                session_id=session_id,
                owner=owner,
                model=model or self._owner_models.get(owner) or None,
                coordinator=bool(coordinator),
                max_steps=max_steps,
                source="sidebar",
                **({"extra": extra} if extra else {}),
            )
        except BaseException:
            if previous is not None and session_id:
                await self.services.sessions.update(session_id, coordinator=previous)
            raise
        return {"run_id": str(handle.run_id), "session_id": str(handle.session_id)}

    def live_run(self, run_id: str) -> Any:
        if self._runtime is None:
            return None
        return self._runtime.get_run(run_id)

    async def _run_owner_check(self, owner: str, run_id: str) -> tuple[Any, "RunRecord | None"]:
        """(live handle or None, stored record or None); RunNotFound if neither or not visible."""
        handle = self.live_run(run_id)
        record: RunRecord | None = None
        try:
            record = await self.services.runs.get(run_id)
        except RunNotFound:
            record = None
        if handle is None and record is None:
            raise RunNotFound(f"no run {run_id!r}")
        run_owner = record.owner if record is not None else handle.state.owner
        if not _can_see(run_owner, owner):
            raise RunNotFound(f"no run {run_id!r}")
        return handle, record

    async def run_events(self, owner: str, run_id: str, after_seq: int = 0) -> AsyncIterator[Batch] | None:
        """Check access now (so a 404 precedes any stream), then return batches of ``(seq, json)``
        (deltas that queued up merged, ``sse_batches``): live from the runtime when the run is
        here, else from the store. ``None`` when the
        client already has everything up to ``done`` (an SSE client must then stop reconnecting).

        A client resuming past every stored event of a finished run (ids a dead process sent
        but never stored) still gets the terminal ``done``, numbered after its own id."""
        handle, record = await self._run_owner_check(owner, run_id)
        if handle is not None:
            if handle.finished and after_seq >= handle.bus.last_seq:
                return None
            return live_batches(handle, after_seq, self.config.sse_merge_backlog)
        if record is not None and record.status != "running" and after_seq > 0:
            if not await self.services.runs.events_after(run_id, after_seq, limit=1):
                done_seq = await self.services.runs.done_seq(run_id)
                if done_seq is None:  # the done a finished run without a stored one gets (below)
                    done_seq = await self.services.runs.last_event_id(run_id) + 1
                if after_seq == done_seq:
                    return None  # exactly at the done: the client has everything
        return self._stored_events(run_id, after_seq)

    async def _stored_events(self, run_id: str, after_seq: int) -> AsyncIterator[Batch]:
        """Replay from the store; while the row says 'running' (another process, e.g. a kernel,
        owns the run) keep polling; a finished run whose events lack ``done`` (or a client past
        them all) gets one, unstored, numbered after every reserved id and the client's own."""
        last = after_seq
        while True:
            batch = await self.services.runs.events_after(run_id, last, limit=STORE_PAGE)
            done_at = next((i for i, (_, data) in enumerate(batch) if data.get("type") == "done"), None)
            if done_at is not None:
                yield coalesce_stored(batch[: done_at + 1], self.config.sse_merge_backlog)
                return
            if batch:
                last = batch[-1][0]
                yield coalesce_stored(batch, self.config.sse_merge_backlog)
            if len(batch) == STORE_PAGE:
                continue
            handle = self.live_run(run_id)
            if handle is not None:  # started here meanwhile (or resumed): follow it live
                async for item in live_batches(handle, last, self.config.sse_merge_backlog):
                    yield item
                return
            record = await self.services.runs.get(run_id)
            if record.status != "running":
                if not batch:
                    reason = record.status if record.status in ("finished", "cancelled", "max_steps") else "error"
                    done = {"type": "done", "session_id": record.session_id, "run_id": run_id, "reason": reason}
                    yield [(max(last, await self.services.runs.last_event_id(run_id)) + 1, encode_wire(done))]
                    return
                continue
            await asyncio.sleep(STORE_POLL_SECS)

    async def cancel_run(self, owner: str, run_id: str) -> dict[str, Any]:
        handle, record = await self._run_owner_check(owner, run_id)
        if handle is not None and not _handle_done(handle):
            handle.cancel()
            return {"run_id": run_id, "status": "cancelling"}
        status = record.status if record is not None else "finished"
        return {"run_id": run_id, "status": status}

    async def answer(self, owner: str, run_id: str, request_id: str, answer: Any) -> dict[str, Any]:
        handle, _record = await self._run_owner_check(owner, run_id)
        if handle is None or _handle_done(handle):
            raise RunConflict(f"run {run_id!r} is not running; nothing is waiting for an answer")
        accepted = handle.answer(request_id, answer)
        if asyncio.iscoroutine(accepted):
            accepted = await accepted
        if not accepted:
            raise InvalidRequest(
                f"run {run_id!r} has no open question {request_id!r} (already answered or timed out)",
                reason="request_not_found",
                status=404,
            )
        return {"run_id": run_id, "request_id": request_id, "accepted": True}

    # -- papers and notes --------------------------------------------------------------------------
    async def list_papers(self, *, state: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        return [r.to_dict() for r in await self.services.library.list(state=state, limit=limit)]

    async def get_paper(self, paper_id: str) -> dict[str, Any]:
        return (await self.services.library.get(paper_id)).to_dict()

    async def add_paper(self, owner: str, identifier: Any, *, download: bool = True) -> dict[str, Any]:
        """Metadata now (so the answer shows the paper); download + parse queued in the background."""
        from .intake import validate_identifier

        paper_id, kind = validate_identifier(identifier)
        record = await self.services.library.resolve(paper_id)
        out = record.to_dict()
        out["intake_id"] = None
        if download and self.intake is not None and record.state in ("", "metadata"):
            item = await self.intake.enqueue(owner, record.id, kind)
            out["intake_id"] = item.id
        return out

    def _notes(self) -> Any:
        if not hasattr(type(self.services), "notes"):
            raise NotAvailable("notes are not available yet")
        return self.services.notes

    async def list_notes(
        self, owner: str, *, paper_id: str | None = None, session_id: str | None = None, query: str | None = None
    ) -> list[dict[str, Any]]:
        """The caller's (and ownerless) notes, optionally of one paper / session, or matching ``query``."""
        service = self._notes()
        if session_id:
            await self.session(owner, session_id)
        notes = await (service.search(query, paper_id=paper_id, limit=500) if query else service.list(paper_id, limit=500))
        return [
            n.to_dict() for n in notes
            if _can_see(n.owner, owner) and (session_id is None or n.session_id == session_id)
        ]

    async def add_note(self, owner: str, body: dict[str, Any]) -> dict[str, Any]:
        paper_id = body.get("paper_id")
        if not isinstance(paper_id, str) or not paper_id.strip():
            raise InvalidRequest("'paper_id' must name a paper in the library", reason="invalid_note")
        fields: dict[str, Any] = {}
        for key in ("quote", "comment", "section", "session_id"):
            value = body.get(key)
            if value is not None and not isinstance(value, str):
                raise InvalidRequest(f"'{key}' must be a string", reason="invalid_note")
            if value:
                fields[key] = value
        page = body.get("page")
        if page is not None and (isinstance(page, bool) or not isinstance(page, int)):
            raise InvalidRequest("'page' must be an integer", reason="invalid_note")
        if not (fields.get("quote", "").strip() or fields.get("comment", "").strip()):
            raise InvalidRequest("a note needs a 'quote' or a 'comment' (or both)", reason="invalid_note")
        if "session_id" in fields:
            await self.session(owner, fields["session_id"])
        note = await self._notes().save(paper_id, page=page, owner=owner, **fields)
        return note.to_dict()

    # -- models --------------------------------------------------------------------------------
    def _llm(self) -> Any:
        runtime_llm = getattr(self._runtime, "llm", None) if self._runtime is not None else None
        return runtime_llm or self.services.llm

    async def models(self, owner: str = "") -> dict[str, Any]:
        """The owner's current model and the endpoint's list; an unreachable endpoint gives the configured ones + a warning."""
        if self._warm is not None:
            try:
                await self._warm
            except Exception:  # noqa: BLE001 - list_models reports the real problem below
                pass
        llm = self._llm()
        cfg = self.config
        configured = _unique([cfg.llm_model, cfg.llm_fallback_model, *cfg.llm_fallback_chain])
        warning: str | None = None
        available: list[str] = []
        try:
            available = list(await asyncio.wait_for(llm.list_models(), timeout=cfg.http_timeout_secs))
        except asyncio.TimeoutError:
            warning = f"the LLM endpoint did not list its models within {cfg.http_timeout_secs:g} s"
        except AstroError as exc:
            warning = f"could not list the endpoint's models: {exc}"
        current = self.current_model(owner)
        models = _unique([current, *available]) if available else _unique([current, *configured])
        return {
            "current": current,
            "models": models,
            "configured": configured,
            "source": "endpoint" if available else "config",
            "warning": warning,
        }

    def current_model(self, owner: str) -> str:
        """The model ``owner``'s next run uses: its own choice, else the server's current model."""
        return self._owner_models.get(owner) or str(self._llm().model)

    async def switch_model(self, owner: str, model: Any) -> dict[str, Any]:
        """Switch ``owner``'s model only (another user's runs keep theirs); not persisted."""
        if not isinstance(model, str) or not model.strip() or len(model) > 200:
            raise InvalidRequest("'model' must be a non-empty model name", reason="invalid_model")
        previous = self.current_model(owner)
        self._owner_models[owner] = model.strip()
        return {"current": self._owner_models[owner], "previous": previous}

    # -- bookmarklet tokens ------------------------------------------------------------------------
    @property
    def bookmarklets(self) -> Any:
        from ..store.bookmarklet import BookmarkletRepository

        return BookmarkletRepository(self.services.db)

    async def rotate_bookmarklet_token(self, owner: str) -> str:
        return await self.bookmarklets.rotate(owner)

    async def revoke_bookmarklet_token(self, owner: str) -> bool:
        return await self.bookmarklets.revoke(owner)

    async def bookmarklet_status(self, owner: str) -> dict[str, Any] | None:
        return await self.bookmarklets.status(owner)

    async def recent_intake(self, owner: str, limit: int = 10) -> list[dict[str, Any]]:
        """What the owner's bookmarklet queued lately and how each item ended (shown on its page)."""
        return [item.to_dict() for item in await self.bookmarklets.list(owner, limit=limit)]


def _import_llm_client() -> None:
    """Imports a first run would otherwise do on the event loop (the openai SDK, every tool family
    with its services: PDF parsing, HTML, ...: ~1 s that stalled every request of a fresh server)."""
    import importlib

    import openai  # noqa: F401

    from ..agent import tools

    for module in (*tools.FAMILIES, tools.COORDINATOR_FAMILY):
        importlib.import_module(module, tools.__name__)


def _handle_done(handle: Any) -> bool:
    return bool(handle.finished)


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


def _unique(items: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        if item:
            seen.setdefault(item, None)
    return list(seen)
