"""The run lifecycle: start → session, hooks, history → the turn loop (``loop.py``) → Done.

One ``AgentRuntime`` per process surface (the server extension, a kernel, the CLI). Each
run is one asyncio task with its own ``EventBus``; its turns go through ``loop.run_loop``,
the same loop subagents, coordinator workers and teammates use. The run's promises:

* ``session`` is the first event and ``done`` the last, whatever happens in between;
  any failure becomes an ``error`` event followed by ``done(reason="error")``;
* a turn's assistant message and its tool results are committed in one transaction
  before that turn's ``tool_result`` events are published, so what a watcher saw is on disk,
  and a turn with tool calls is never stored without its results;
* cancel abandons the LLM stream at once; tools already started end as the executor
  decides (Cancel tools stop, Block tools finish), and their results are stored.

Extension points for orchestration: ``turn_preparers`` (async callables run before every
LLM call with the ``RunState``: compaction, background-task injection) and ``run_subagent``
(an isolated loop whose events are re-emitted on the parent's bus). Tools see the run
through its ``RunScope`` (``run.py``), never through the runtime itself.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Iterable

from ..errors import AstroError, RunConflict, SessionNotFound
from ..events import AskUser, Done, Error, Event, PermissionRequest, SessionStarted, Usage
from .bus import EventBus
from .hooks.base import HookEventName
from .loop import Failed, FinalOutput, LoopInput, TurnPreparer, run_loop
from .prompt import build_system_prompt
from .run import RunHandle, RunState, SubagentResult, new_request_id
from .run import RunLocks, fcntl_missing
from .run import ClientNotebook, RunScope

if TYPE_CHECKING:
    from ..services.container import ServiceContainer
    from .permissions import Unattended
    from .hooks import HookRegistry
    from .tools.base import ToolContext
    from .tools.registry import ToolRegistry

log = logging.getLogger(__name__)

_KEEP_FINISHED = 200
EVENT_FLUSH_SECS = 0.1  # a run's events gather this long before one batch goes to agent_events (watchers see them at once)
# Event ids a run reserves per store write before watchers see them, so ids never go backwards after a crash
# (larger: fewer writes; the ids of a crashed run jump by up to this much).
EVENT_ID_RESERVE_BLOCK = 1000
_TITLE_CHARS = 80


def title_from_prompt(prompt: str) -> str:
    first = " ".join(prompt.strip().split())
    return first if len(first) <= _TITLE_CHARS else first[: _TITLE_CHARS - 1].rstrip() + "…"


class AgentRuntime:
    def __init__(
        self,
        services: "ServiceContainer",
        registry: "ToolRegistry | None" = None,
        hooks: "HookRegistry | None" = None,
        llm: Any = None,
    ) -> None:
        from .compaction import CompactionPolicy
        from .executor import ToolLimits
        from .hooks import HookRegistry
        from .permissions import PermissionChecker

        self.services = services
        self.config = services.config
        self._registry = registry
        self._coordinator_registry: "ToolRegistry | None" = None
        # services= adds the audit hook: prompts, session start/end and Stop reach agent_audit_log
        self.hooks = hooks if hooks is not None else HookRegistry.from_config(self.config, services=services)
        self._llm = llm
        tuning = services.tuning  # internal knobs: each has its default here, tests pass their own
        self.tool_limits: ToolLimits = tuning.tools or ToolLimits()
        self.compaction: CompactionPolicy = tuning.compaction or CompactionPolicy()
        self._event_flush_secs = tuning.event_flush_secs if tuning.event_flush_secs is not None else EVENT_FLUSH_SECS
        self._reserve_block = tuning.event_id_reserve_block or EVENT_ID_RESERVE_BLOCK
        self.permissions = PermissionChecker.from_config(self.config)
        self.turn_preparers: list[TurnPreparer] = []
        from .compaction import default_turn_preparers  # background results, then compaction (helper F)

        self.turn_preparers.extend(default_turn_preparers(self))
        self._runs: dict[str, RunHandle] = {}
        self.run_locks = RunLocks(self.config.home_path / ".run-locks")
        self._active_sessions: dict[str, RunHandle] = {}
        self._started = False
        self._closing = False
        self._unsettled: dict[str, str] = {}  # run id → final status a locked store refused to take
        self._root_noticed = False  # the first run of this runtime warns when the project root is $HOME

    # -- wiring -----------------------------------------------------------------------------
    @property
    def llm(self) -> Any:
        if self._llm is None:
            self._llm = self.services.llm
        return self._llm

    def registry_for(self, coordinator: bool = False) -> "ToolRegistry":
        from .tools import build_default_registry

        if self._registry is None:
            self._registry = build_default_registry(self.config)
        if not coordinator:
            return self._registry
        if self._coordinator_registry is None:
            from .tools import COORDINATOR_FAMILY, family_tools

            merged = self._registry.subset(self._registry.names())  # keeps the unavailable reasons
            for tool in family_tools(COORDINATOR_FAMILY, self.config):
                merged.replace(tool)
            self._coordinator_registry = merged
        return self._coordinator_registry

    @property
    def registry(self) -> "ToolRegistry":
        return self.registry_for(False)

    async def start(self) -> None:
        """Close runs a dead process left 'running' (idempotent, also done by the first run).

        Runs another living process (the server, a kernel) is executing keep their status:
        their run locks are held (``RunLocks`` in ``run.py``).
        """
        if self._started:
            return
        self._started = True
        try:
            if fcntl_missing():
                await self.services.runs.mark_interrupted()
                return
            for run_id in await self.services.runs.list_running():
                if run_id not in self._runs and not self.run_locks.is_alive(run_id):
                    await self.services.runs.close_interrupted(run_id)
        except AstroError as exc:
            log.warning("could not mark interrupted runs: %s", exc)

    # -- runs ---------------------------------------------------------------------------------
    async def start_run(
        self,
        prompt: str,
        *,
        session_id: str | None = None,
        owner: str = "",
        model: str | None = None,
        coordinator: bool = False,
        max_steps: int | None = None,
        source: str = "",
        client: ClientNotebook | None = None,
        prompt_context: str = "",
        unattended: "Unattended | None" = None,
    ) -> RunHandle:
        """Create (or resume) the session, register the run and start its task.

        ``client`` is the sidebar's open notebook (the notebook tools act through it) and
        ``prompt_context`` the note appended to the prompt about it. ``unattended``: no one can
        answer, so questions are decided at once (the run's first notice says how)."""
        from ..store.sessions import new_id

        if self._closing:
            raise RunConflict("the runtime is shutting down")
        # the prompt and max_steps were checked by the application layer (app/runs.py), the one place
        await self.start()
        await self._settle_runs()
        if session_id:
            session = await self.services.sessions.find(session_id)
            if session is None:
                raise SessionNotFound(f"no session {session_id!r}")
            coordinator = coordinator or session.coordinator
        else:
            session = await self.services.sessions.create(
                owner=owner, model=model or self.llm.model, coordinator=coordinator, source=source
            )
        sid = session.id
        run_model = model or self.llm.model
        if sid in self._active_sessions:
            raise RunConflict(f"session {sid} already has an active run ({self._active_sessions[sid].run_id})")
        run_id = new_id("run")
        state = RunState(
            run_id=run_id,
            session_id=sid,
            owner=owner,
            model=model or None,
            max_steps=max_steps or self.config.max_steps,
            coordinator=coordinator,
            client=client,
            prompt_context=prompt_context,
            unattended=unattended,
        )
        block = self._reserve_block
        bus = EventBus(run_id, self.services.runs, flush_interval=self._event_flush_secs,
                       reserve_block=block, reserved=block)  # the first block is reserved with the row
        handle = RunHandle(state, bus, asyncio.Event())
        if not self.run_locks.acquire(f"ses-{sid}"):  # the session is running in another process
            raise RunConflict(f"session {sid} already has an active run in another process (server or kernel)")
        self._active_sessions[sid] = handle  # reserved before the next await: no double start
        self.run_locks.acquire(run_id)  # before the row exists, so no other process sees it orphaned
        try:
            await self.services.runs.create(run_id, sid, owner=owner, prompt=prompt, model=run_model,
                                            reserve_ids=block)
            if session.model != run_model:  # the session lists the model it runs with now
                await self.services.sessions.update(sid, model=run_model)
                if session.model:
                    state.previous_model = session.model
            state.session_model = run_model
        except BaseException:
            self._active_sessions.pop(sid, None)
            self.run_locks.release(run_id)
            self.run_locks.release(f"ses-{sid}")
            raise
        self._runs[run_id] = handle
        handle.task = asyncio.get_running_loop().create_task(self._run(handle, prompt, session.title), name=run_id)
        self._forget_old_runs()
        return handle

    async def _settle_runs(self) -> None:
        """Store the final status of runs whose ``finish`` write failed (the store was locked)."""
        for run_id, reason in list(self._unsettled.items()):
            try:
                await self.services.runs.finish(run_id, reason)
            except AstroError as exc:
                log.warning("run %s still cannot be marked %s: %s", run_id, reason, exc)
                return
            self._unsettled.pop(run_id, None)

    def get_run(self, run_id: str) -> RunHandle | None:
        return self._runs.get(run_id)

    def active_runs(self) -> list[RunHandle]:
        return list(self._active_sessions.values())

    def active_run_for(self, session_id: str) -> RunHandle | None:
        return self._active_sessions.get(session_id)

    def _forget_old_runs(self) -> None:
        finished = [rid for rid, h in self._runs.items() if h.finished]
        for rid in finished[: max(0, len(finished) - _KEEP_FINISHED)]:
            self._runs.pop(rid, None)

    async def close(self, timeout: float = 30.0) -> None:
        """Cancel active runs and wait for them (each still ends with Done and is marked)."""
        self._closing = True
        for handle in self.active_runs():
            handle.cancel()
        # also runs that published Done but are still flushing their events
        tasks = [h.task for h in self._runs.values() if h.task is not None and not h.task.done()]
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        await self._settle_runs()
        await self.hooks.drain(timeout=5.0)

    # -- the loop -----------------------------------------------------------------------------
    async def _run(self, handle: RunHandle, prompt: str, title: str) -> Done:
        state, bus = handle.state, handle.bus
        reason = "finished"
        base = {"session_id": state.session_id, "run_id": state.run_id}
        bus.publish(SessionStarted(session_id=state.session_id, run_id=state.run_id, title=title, model=state.model or self.llm.model))
        if not self._root_noticed:
            self._root_noticed = True
            from .tools.filesystem.protected import root_warning

            warning = root_warning(self.config)
            if warning:
                bus.publish(Error(message=warning, reason="notice"))
        if state.unattended is not None:
            bus.publish(Error(message=state.unattended.notice(), reason="notice"))
        try:
            self.hooks.fire_and_forget(HookEventName.USER_PROMPT_SUBMIT, {**base, "prompt": prompt, "owner": state.owner})
            await self.hooks.run(HookEventName.SESSION_START, {**base, "owner": state.owner})
            registry = self.registry_for(state.coordinator)
            from .tools.mcp import install as install_mcp_tools

            await install_mcp_tools(registry, self.services)  # outside servers' tools, started on first need
            memories = await self._memories(state.owner)
            system = build_system_prompt(registry, memories=memories, coordinator=state.coordinator)
            from .compaction import load_history

            history = await load_history(self.services, state.session_id)  # summary of compacted messages first
            changed = state.previous_model  # this turn runs another model than the last
            turn_meta = {"model": state.model or self.llm.model, "previous_model": changed} if changed else {}
            if state.prompt_context:  # e.g. the open notebook: stored apart from what the user typed
                turn_meta["context"] = state.prompt_context
            await self.services.messages.append(state.session_id, {"role": "user", "content": prompt},
                                                run_id=state.run_id, metadata=turn_meta or None)
            user_msg = {"role": "user", "content": prompt + state.prompt_context}
            state.messages = [{"role": "system", "content": system}, *history, user_msg]
            reason = await self._loop(handle, registry)
        except asyncio.CancelledError:
            reason = "cancelled"
        except Exception as exc:  # noqa: BLE001 - every failure ends as error + done
            reason = "error"
            self._publish_error(bus, exc, state.step or None)
        return await self._finish(handle, reason, prompt, title)

    async def _loop(self, handle: RunHandle, registry: "ToolRegistry") -> str:
        """The run's turns through ``loop.run_loop``: stored turns, held results, the run's preparers."""
        from .executor import ToolExecutor

        state = handle.state
        handle.scope = RunScope(state=state, registry=registry, runner=self.run_subagent, answers=handle.answers,
                                client=state.client)
        ctx = self._tool_context(handle, handle.scope)
        state.tool_ctx = ctx  # compaction snapshots ctx.file_state and parents the memory bridge

        async def store(messages: list[dict[str, Any]]) -> None:
            await self.services.messages.append_many(state.session_id, messages, run_id=state.run_id)

        def switched(to_model: str) -> None:
            self.hooks.fire_and_forget(HookEventName.NOTIFICATION, {"level": "info", "message": f"model switched to {to_model}"})

        outcome = await run_loop(LoopInput(
            llm=self.llm, executor=ToolExecutor(registry, self.permissions, self.hooks, self.config, self.tool_limits),
            registry=registry, ctx=ctx, state=state, cancelled=handle.cancelled, preparers=self.turn_preparers,
            sink=store, hold_results=True, on_model_switch=switched,
            measure=self._usage,
        ))
        if isinstance(outcome.ending, Failed):
            raise outcome.ending.error
        if isinstance(outcome.ending, FinalOutput):
            state.final_text = outcome.ending.text
        return outcome.reason

    def _tool_context(self, handle: RunHandle, scope: RunScope) -> "ToolContext":
        from .tools.base import ToolContext
        from .tools.file_state import FileStateCache

        state, bus = handle.state, handle.bus

        async def publish(event: Event) -> None:
            bus.publish(event)

        async def ask_user(question: str, options: list[str] | None = None) -> str:
            rid = new_request_id()
            future = handle.answers.create(rid)
            if future.done():  # the run was cancelled: nothing is put to the user
                return await future
            from .tools.ask_user import ASK_USER_TIMEOUT_SECS

            timeout = self.services.tuning.ask_user_secs or ASK_USER_TIMEOUT_SECS
            bus.publish(AskUser(request_id=rid, question=question, options=list(options or []), timeout_secs=timeout))
            self.hooks.fire_and_forget(HookEventName.NOTIFICATION, {"level": "question", "message": question, "run_id": state.run_id})
            try:
                return await asyncio.wait_for(future, timeout)
            except asyncio.TimeoutError:
                raise TimeoutError(f"no answer within {timeout:g} s") from None
            finally:
                handle.answers.discard(rid)

        def ask_permission(request: PermissionRequest) -> "asyncio.Future[str]":
            """The executor publishes the request and owns the timeout; this only waits for the answer.

            A plain function returning a future (not a coroutine) so the answer slot exists
            before the executor announces the question: an instant answer cannot be lost.
            """
            rid = request.request_id or new_request_id()
            future = handle.answers.create(rid)
            future.add_done_callback(lambda _f: handle.answers.discard(rid))
            return future

        return ToolContext(
            config=self.config,
            services=self.services,
            session_id=state.session_id,
            cancelled=handle.cancelled,
            emit=publish,
            file_state=FileStateCache(),
            run_id=state.run_id,
            ask_user=None if state.unattended else ask_user,  # nobody to ask: ask_user says so at once
            ask_permission=None if state.unattended else ask_permission,
            unattended=state.unattended,
            scope=scope,
        )

    async def _memories(self, owner: str) -> str:
        memories = getattr(self.services, "memories", None)
        block = getattr(memories, "prompt_block", None)
        if block is None:
            return ""
        try:
            return str(await block(owner=owner))
        except Exception as exc:  # noqa: BLE001 - memories are a nicety; the run goes on without them
            log.warning("memories unavailable: %s", exc)
            return ""

    @staticmethod
    def _publish_error(bus: EventBus, exc: BaseException, step: int | None) -> None:
        if isinstance(exc, AstroError):
            message, reason = str(exc) or type(exc).__name__, exc.reason
        else:
            log.exception("run failed", exc_info=exc)
            message, reason = f"internal error: {type(exc).__name__}: {exc}", "internal"
        if not bus.done:
            bus.publish(Error(message=message, reason=reason, step=step))

    async def _finish(self, handle: RunHandle, reason: str, prompt: str, title: str) -> Done:
        """Stop/SessionEnd hooks, title, run status, then Done; each step survives the others failing."""
        state, bus = handle.state, handle.bus
        base = {"session_id": state.session_id, "run_id": state.run_id, "reason": reason}
        for event_name in (HookEventName.STOP, HookEventName.SESSION_END):
            try:
                await self.hooks.run(event_name, dict(base))
            except Exception as exc:  # noqa: BLE001
                log.warning("%s hooks failed: %s", event_name.value, exc)
            if event_name is HookEventName.STOP and handle.scope is not None:
                try:  # workers still queued or running stop with the run (recorded as stopped)
                    await handle.scope.close()
                except Exception as exc:  # noqa: BLE001
                    log.warning("closing the run's scope failed: %s", exc)
        try:
            changes: dict[str, Any] = {}
            if not title:
                changes["title"] = title_from_prompt(prompt)
            if state.model and state.model != (state.session_model or state.model):
                changes["model"] = state.model  # switched during the run (fallback after overloads)
            if changes:
                await self.services.sessions.update(state.session_id, **changes)
            else:
                await self.services.sessions.touch(state.session_id)
        except Exception as exc:  # noqa: BLE001 - the run's outcome matters more than its title
            log.warning("could not update session %s: %s", state.session_id, exc)
        try:
            await self.services.runs.finish(state.run_id, reason)
        except Exception as exc:  # noqa: BLE001 - e.g. another process holds the lock: retried by the next run
            log.warning("could not mark run %s %s: %s", state.run_id, reason, exc)
            self._unsettled[state.run_id] = reason
        release = getattr(self.services, "release_run", None)  # kernels notebook_run started for this run
        if release is not None:
            await release(state.run_id)
        self.run_locks.release(state.run_id)
        self.run_locks.release(f"ses-{state.session_id}")
        done = Done(session_id=state.session_id, run_id=state.run_id, reason=reason)  # type: ignore[arg-type]
        bus.publish(done)
        handle.done_event = done
        if self._active_sessions.get(state.session_id) is handle:
            del self._active_sessions[state.session_id]
        await bus.aclose()
        return done

    async def _usage(self, state: RunState, last: dict[str, int]) -> Usage:
        """The run's tokens and cost so far, and how full the context is against the compaction
        threshold: the call just answered (``last``) holds its prompt and its answer, in the
        server's own count. Called after a call completed, so the model's profile is known and
        measuring sends nothing to the endpoint."""
        from ..services.evidence import cost_usd

        model = state.model or self.llm.model
        window = compact_at = 0
        try:
            profile_of = getattr(self.llm, "profile", None)
            if profile_of is not None:
                window = (await profile_of(model)).context_window
            for preparer in self.turn_preparers:
                limits = getattr(preparer, "limits", None)
                if limits is not None:
                    compact_at = (await limits(state))[0]
        except Exception as exc:  # noqa: BLE001 - the gauge is a nicety: the tokens are still said
            log.warning("could not size the context of run %s: %s", state.run_id, exc)
        return Usage(
            model=model,
            prompt_tokens=state.usage.get("prompt_tokens", 0),
            completion_tokens=state.usage.get("completion_tokens", 0),
            cost_usd=cost_usd(state.usage, model, self.config.llm_prices),
            context_tokens=int(last.get("prompt_tokens", 0)) + int(last.get("completion_tokens", 0)),
            context_window=window,
            compact_at=compact_at,
        )

    # -- subagents and direct calls ----------------------------------------------------------
    async def run_subagent(
        self,
        task: str,
        *,
        parent_ctx: "ToolContext",
        max_steps: int | None = None,
        registry: "ToolRegistry | None" = None,
        tools: Iterable[str] | None = None,
        system_prompt: str | None = None,
    ) -> SubagentResult:
        """An isolated loop (``subagents.run_subagent``) on this runtime's LLM, permissions and hooks."""
        from .subagents import run_subagent

        return await run_subagent(self, task, parent_ctx=parent_ctx, max_steps=max_steps, registry=registry,
                                  tools=tools, system_prompt=system_prompt)

    def tool_scope(self, session_id: str = "", run_id: str = "", *, owner: str = "") -> RunScope:
        """The scope of a tool called directly (the kernel's ``%astro tool``): this runtime's tools
        and subagents, a fresh state, no sidebar."""
        return RunScope(state=RunState(run_id=run_id, session_id=session_id, owner=owner), registry=self.registry,
                        runner=self.run_subagent)
