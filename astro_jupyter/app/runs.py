"""Runs: prompt validation, start (with the session's coordinator mode), events (live or
stored, resumable), cancel, answers — with ownership."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, AsyncIterator

from ..errors import InvalidRequest, PermissionDenied, RateLimited, RunConflict, RunNotFound
from .common import AppBase, Owner, can_see, encode_wire, may_change, visible_to
from .event_batches import MERGE_BACKLOG, Batch, coalesce, live_batches

if TYPE_CHECKING:
    from ..agent.run import RunHandle
    from ..store.runs import RunRecord

STORE_PAGE = 500
MAX_PROMPT_CHARS = 100_000  # the longest prompt accepted from a user
MAX_STEPS_LIMIT = 200  # the most LLM turns one run may be given (the default is AstroConfig.max_steps)
STORE_POLL_SECS = 0.25
RUN_CAP_RETRY_SECS = 15.0  # Retry-After of a refused run: a typical answer's length, not a promise


class TooManyRuns(RateLimited):
    """The user already has ``AstroConfig.max_runs_per_user`` runs going (HTTP 429; the sidebar shows why)."""

    reason = "too_many_runs"


class RunsMixin(AppBase):
    def check_prompt(self, prompt: Any) -> str:
        """A non-empty string of at most ``MAX_PROMPT_CHARS`` (every front end, one rule)."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise InvalidRequest("'prompt' must be a non-empty string", reason="invalid_prompt")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise InvalidRequest(
                f"the prompt has {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS}",
                reason="prompt_too_long",
                status=413,
            )
        return prompt

    def check_max_steps(self, max_steps: Any) -> int | None:
        """None (the configured default) or an integer from 1 to ``MAX_STEPS_LIMIT`` (every front end, one rule)."""
        if max_steps is None:
            return None
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or not 1 <= max_steps <= MAX_STEPS_LIMIT:
            raise InvalidRequest(f"'max_steps' must be an integer from 1 to {MAX_STEPS_LIMIT}, not {max_steps!r}",
                                 reason="invalid_max_steps")
        return max_steps

    async def start_run(
        self,
        owner: Owner,
        prompt: Any,
        *,
        session_id: str | None = None,
        model: str | None = None,
        coordinator: bool | None = None,
        max_steps: int | None = None,
        notebook: Any = None,
    ) -> dict[str, str]:
        """Start a run; ``{"run_id", "session_id"}`` (the handle: ``start_run_handle``)."""
        handle = await self.start_run_handle(
            owner, prompt, session_id=session_id, model=model, coordinator=coordinator,
            max_steps=max_steps, notebook=notebook,
        )
        return {"run_id": str(handle.run_id), "session_id": str(handle.session_id)}

    async def start_run_handle(
        self,
        owner: Owner,
        prompt: Any,
        *,
        session_id: str | None = None,
        model: str | None = None,
        coordinator: bool | None = None,
        max_steps: int | None = None,
        notebook: Any = None,
        client_files: Any = None,
        unattended: Any = None,
    ) -> "RunHandle":
        """Start a run and return its live handle (for ``follow``). ``coordinator=None`` means
        "the session's stored mode"; an explicit value wins and becomes the session's mode
        (restored if the run cannot start). ``notebook`` is the sidebar's active notebook
        (``notebook_context.py``); ``client_files`` an ACP client's file system (``agent/run.py``);
        ``unattended`` (``agent.permissions.Unattended``): no one can answer this run's questions."""
        prompt = self.check_prompt(prompt)
        if model:
            model = self.check_allowed_model(model)  # type: ignore[attr-defined]
        max_steps = self.check_max_steps(max_steps)
        from .notebook_context import parse_notebook_context

        client, context_note = parse_notebook_context(notebook, self.services)
        if client_files is not None:
            import dataclasses

            from ..agent.run import ClientNotebook

            client = dataclasses.replace(client or ClientNotebook(), files=client_files)
        previous: bool | None = None
        if session_id:
            record = await self.session(owner, session_id, change=True)  # type: ignore[attr-defined]
            if coordinator is None:
                coordinator = record.coordinator
            elif coordinator != record.coordinator:
                # stored first: the runtime ORs the argument with the stored flag
                previous = record.coordinator
                await self.services.sessions.update(session_id, coordinator=coordinator)
        key = owner or ""
        try:
            async with self._run_cap_lock(key):
                handle = await self.runtime.start_run(
                    prompt,
                    session_id=session_id,
                    owner=key,
                    model=model or self._owner_models.get(key) or None,
                    coordinator=bool(coordinator),
                    max_steps=max_steps,
                    source=self.source,
                    client=client,
                    prompt_context=context_note if client is not None else "",
                    unattended=unattended,
                )
        except BaseException:
            if previous is not None and session_id:
                await self.services.sessions.update(session_id, coordinator=previous)
            raise
        return handle

    @contextlib.asynccontextmanager
    async def _run_cap_lock(self, key: str) -> AsyncIterator[None]:
        """With ``max_runs_per_user`` set, check the cap and start the run under one lock, so starts
        at once cannot all pass the check before any of them is counted."""
        if self.config.max_runs_per_user <= 0:
            yield
            return
        async with self._start_run_lock:
            await self._check_run_cap(key)
            yield

    async def _check_run_cap(self, key: str) -> None:
        """``TooManyRuns`` when ``key`` already has ``max_runs_per_user`` runs going besides the one it is
        starting. Counted: this process's live runs and the runs other living processes (the user's
        kernels, CLI) hold on the same library. Ownerless runs (kernel, CLI) count for everyone: on a hub they are
        the same person's, whose library this is."""
        cap = self.config.max_runs_per_user
        if cap <= 0:
            return
        runtime = self.runtime

        def counts(run_owner: str) -> bool:
            return key == "" or can_see(run_owner, key)

        going = 1 + sum(counts(h.state.owner) for h in runtime.active_runs())  # 1: the one starting
        if going <= cap:
            for run_id in await self.services.runs.list_running():
                locks = runtime.run_locks  # this process's runs were counted above
                if runtime.get_run(run_id) is None and not locks.held_here(run_id) and locks.is_alive(run_id):
                    try:
                        going += counts((await self.services.runs.get(run_id)).owner)
                    except RunNotFound:
                        continue
        if going > cap:
            going -= 1  # the one being refused
            raise TooManyRuns(
                f"you already have {going} run{'s' if going != 1 else ''} going and this hub allows {cap} at once "
                "(AstroConfig.max_runs_per_user): wait for one to finish or cancel it, then ask again",
                RUN_CAP_RETRY_SECS,
            )

    async def close_orphaned_runs(self) -> list[str]:
        """Close the runs no living process executes any more (a killed agent host, server or kernel):
        each gets an ``error`` and a ``done`` numbered after every id a watcher can have seen. What a
        runtime does when it starts, for a process that runs no agent itself (the server of an agent host)."""
        from ..agent.run import RunLocks, fcntl_missing

        locks = RunLocks(self.config.home_path / ".run-locks")
        closed = []
        for run_id in await self.services.runs.list_running():
            if fcntl_missing() or not locks.is_alive(run_id):
                if await self.services.runs.close_interrupted(run_id) is not None:
                    closed.append(run_id)
        return closed

    def live_run(self, run_id: str) -> Any:
        if self._runtime is None:
            return None
        return self._runtime.get_run(run_id)

    async def _run_owner_check(
        self, owner: Owner, run_id: str, *, change: bool = False
    ) -> tuple[Any, "RunRecord | None"]:
        """(live handle or None, stored record or None); RunNotFound if neither or not visible;
        with ``change`` (cancel, answer) PermissionDenied for a visible run of another identity."""
        handle = self.live_run(run_id)
        record: RunRecord | None = None
        try:
            record = await self.services.runs.get(run_id)
        except RunNotFound:
            record = None
        if handle is None and record is None:
            raise RunNotFound(f"no run {run_id!r}")
        run_owner = record.owner if record is not None else handle.state.owner
        if not visible_to(run_owner, owner):
            raise RunNotFound(f"no run {run_id!r}")
        if change and not may_change(run_owner, owner):
            raise PermissionDenied(
                f"run {run_id!r} belongs to the server's shared identity: you can follow it but not cancel it "
                "or answer its questions"
            )
        return handle, record

    async def run_events(self, owner: Owner, run_id: str, after_seq: int = 0, *,
                         pace: float = 0.0) -> AsyncIterator[Batch] | None:
        """Check access now (so a 404 precedes any stream), then return batches of ``(seq, json)``
        (deltas that queued up merged, ``event_batches``): live from the runtime when the run is
        here (at most one batch per ``pace`` seconds while events keep coming: ``live_batches``),
        else from the store. ``None`` when the
        client already has everything up to ``done`` (an SSE client must then stop reconnecting).

        A client resuming past every stored event of a finished run (ids a dead process sent
        but never stored) still gets the terminal ``done``, numbered after its own id."""
        handle, record = await self._run_owner_check(owner, run_id)
        if handle is not None:
            if handle.finished and after_seq >= handle.bus.last_seq:
                return None
            return live_batches(handle, after_seq, MERGE_BACKLOG, pace)
        if record is not None and record.status != "running" and after_seq > 0:
            if not await self.services.runs.events_after(run_id, after_seq, limit=1):
                done_seq = await self.services.runs.done_seq(run_id)
                if done_seq is None:  # the done a finished run without a stored one gets (below)
                    done_seq = await self.services.runs.last_event_id(run_id) + 1
                if after_seq == done_seq:
                    return None  # exactly at the done: the client has everything
        return self._stored_events(run_id, after_seq, pace)

    async def _stored_events(self, run_id: str, after_seq: int, pace: float = 0.0) -> AsyncIterator[Batch]:
        """Replay from the store; while the row says 'running' (another process, e.g. a kernel,
        owns the run) keep polling; a finished run whose events lack ``done`` (or a client past
        them all) gets one, unstored, numbered after every reserved id and the client's own."""
        last = after_seq
        while True:
            batch = await self.services.runs.events_after(run_id, last, limit=STORE_PAGE)
            done_at = next((i for i, (_, data) in enumerate(batch) if data.get("type") == "done"), None)
            if done_at is not None:
                yield coalesce(batch[: done_at + 1], MERGE_BACKLOG)
                return
            if batch:
                last = batch[-1][0]
                yield coalesce(batch, MERGE_BACKLOG)
            if len(batch) == STORE_PAGE:
                continue
            handle = self.live_run(run_id)
            if handle is not None:  # started here meanwhile (or resumed): follow it live
                async for item in live_batches(handle, last, MERGE_BACKLOG, pace):
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

    async def cancel_run(self, owner: Owner, run_id: str) -> dict[str, Any]:
        handle, record = await self._run_owner_check(owner, run_id, change=True)
        if handle is not None and not handle.finished:
            handle.cancel()
            return {"run_id": run_id, "status": "cancelling"}
        status = record.status if record is not None else "finished"
        return {"run_id": run_id, "status": status}

    async def answer(self, owner: Owner, run_id: str, request_id: str, answer: Any) -> dict[str, Any]:
        """Answer an open ``ask_user`` / ``permission_request`` of a live run."""
        handle, _record = await self._run_owner_check(owner, run_id, change=True)
        if handle is None or handle.finished:
            raise RunConflict(f"run {run_id!r} is not running; nothing is waiting for an answer")
        if not handle.answer(request_id, answer):
            raise InvalidRequest(
                f"run {run_id!r} has no open question {request_id!r} (already answered or timed out)",
                reason="request_not_found",
                status=404,
            )
        return {"run_id": run_id, "request_id": request_id, "accepted": True}

