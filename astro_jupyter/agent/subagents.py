"""Subagents: the isolated loop, and what the tools that start one share.

:func:`run_subagent` runs ``loop.run_loop`` with fresh messages, a silent context (no user
questions), the parent's permission checker and hooks, and Subagent start/stop events tagged
with the subagent id; the runtime hands it to tools as the run scope's subagent runner. The
``subagent``, ``load_skill`` (fork), teammate, coordinator-worker and compaction-memory-bridge
callers share the max_steps rule (default ``SUBAGENT_MAX_STEPS``, a request above
``SUBAGENT_STEP_LIMIT`` is an error, not silently clamped) and the restricted registries.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any, Iterable, Protocol

from ..errors import AstroError, InvalidInput
from ..events import Event, Subagent
from .hooks.base import HookEventName
from .loop import Cancelled, Failed, LoopInput, MaxSteps, StreamingLLM, run_loop
from .prompt import SUBAGENT_ROLE, build_system_prompt
from .run import RunScope, RunState, SubagentResult

if TYPE_CHECKING:
    from ..config import AstroConfig
    from .executor import ToolLimits
    from .hooks import HookRegistry
    from .permissions import PermissionChecker
    from .tools.base import ToolContext
    from .tools.registry import ToolRegistry

MEMORY_BRIDGE_EXTRA = ("save_memory",)


class SubagentLimitError(InvalidInput):
    """A max_steps request outside the allowed range; the message is for the model."""


SUBAGENT_MAX_STEPS = 5  # a subagent's max_steps when the model names none
SUBAGENT_STEP_LIMIT = 10  # the most it may ask for


def resolve_max_steps(requested: Any) -> int:
    if requested is None or requested == "":
        return SUBAGENT_MAX_STEPS
    try:
        steps = int(requested)
    except (TypeError, ValueError):
        raise SubagentLimitError(f"max_steps must be an integer, got {requested!r}") from None
    if isinstance(requested, float) and requested != steps:
        raise SubagentLimitError(f"max_steps must be an integer, got {requested!r}")
    limit = SUBAGENT_STEP_LIMIT
    if steps < 1:
        raise SubagentLimitError(f"max_steps must be at least 1, got {steps}")
    if steps > limit:
        raise SubagentLimitError(
            f"max_steps {steps} is above the limit of {limit} steps per subagent; split the task or ask for at most {limit}"
        )
    return steps


def worker_registry(registry: "ToolRegistry", exclude: Iterable[str] = ()) -> "ToolRegistry":
    """The parent's tools for a subagent or worker: none flagged ``lead_only`` (a subagent cannot
    ask the user, nesting stops at one level, the team tools act as the lead), nor ``exclude``."""
    banned = set(exclude)
    return registry.subset(t.name for t in registry.sorted_tools() if not t.lead_only and t.name not in banned)


def readonly_registry(registry: "ToolRegistry", extra: Iterable[str] = MEMORY_BRIDGE_EXTRA) -> "ToolRegistry":
    """Read-only tools plus ``extra`` (the compaction memory bridge: read-only + save_memory)."""
    wanted = {t.name for t in registry.sorted_tools() if t.is_readonly} | set(extra)
    return registry.subset(t.name for t in registry.sorted_tools() if t.name in wanted and not t.lead_only)


async def spawn(
    ctx: "ToolContext",
    task: str,
    *,
    max_steps: int,
    registry: "ToolRegistry | None" = None,
    system_prompt: str | None = None,
) -> SubagentResult:
    """Run a subagent through the caller's run scope; only its summary comes back.

    Without ``registry`` the subagent gets the parent's tools minus those flagged ``lead_only``.
    """
    scope = ctx.scope
    result = None
    if scope is not None and scope.runner is not None:
        sub_registry = registry if registry is not None else worker_registry(scope.registry)  # teammates, memory bridge: built by the caller
        result = await scope.spawn_subagent(
            task, parent_ctx=ctx, max_steps=max_steps, registry=sub_registry, system_prompt=system_prompt
        )
    if result is None:
        return SubagentResult("subagents need a running agent loop (no runtime in this context)", is_error=True)
    return result


class SubagentHost(Protocol):
    """What a subagent borrows from the runtime that runs its parent."""

    config: "AstroConfig"
    hooks: "HookRegistry"
    permissions: "PermissionChecker"
    tool_limits: "ToolLimits"

    @property
    def llm(self) -> StreamingLLM: ...

    @property
    def registry(self) -> "ToolRegistry": ...


async def run_subagent(
    host: SubagentHost,
    task: str,
    *,
    parent_ctx: "ToolContext",
    max_steps: int | None = None,
    registry: "ToolRegistry | None" = None,
    tools: Iterable[str] | None = None,
    system_prompt: str | None = None,
) -> SubagentResult:
    """An isolated loop: fresh messages, no user questions, events tagged with its id."""
    from ..store.sessions import new_id
    from .executor import ToolExecutor

    config, hooks = host.config, host.hooks
    limit = min(max_steps or SUBAGENT_MAX_STEPS, SUBAGENT_STEP_LIMIT)
    sub_id = new_id("sub")
    base_registry = registry or host.registry
    if tools is not None:
        base_registry = base_registry.subset(tools)
    sub_registry = base_registry.subset(t.name for t in base_registry.sorted_tools() if not t.top_level_only)
    parent_emit = parent_ctx.emit

    async def emit(event: Event) -> None:
        await parent_emit(event if event.subagent_id else dataclasses.replace(event, subagent_id=sub_id))

    # its own run state and scope: load_tool inside a subagent loads for the subagent, not for the parent
    sub_state = RunState(run_id=parent_ctx.run_id, session_id=parent_ctx.session_id, max_steps=limit, owner=parent_ctx.owner)
    parent_scope = parent_ctx.scope
    scope = parent_scope.child(sub_state, sub_registry) if parent_scope is not None else RunScope(sub_state, sub_registry)
    ctx = dataclasses.replace(
        parent_ctx, emit=emit, silent=True, subagent_id=sub_id, depth=parent_ctx.depth + 1, ask_user=None,
        ask_permission=None, scope=scope,
    )
    hook_base = {"session_id": parent_ctx.session_id, "run_id": parent_ctx.run_id, "subagent_id": sub_id}
    await parent_emit(Subagent(id=sub_id, phase="start", task=task, parent_tool_call_id=parent_ctx.tool_call_id))
    await hooks.run(HookEventName.SUBAGENT_START, {**hook_base, "task": task})
    system = build_system_prompt(sub_registry, role=system_prompt or SUBAGENT_ROLE)
    sub_state.messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    summary, is_error = "", False
    try:
        outcome = await run_loop(LoopInput(
            llm=host.llm, executor=ToolExecutor(sub_registry, host.permissions, hooks, config, host.tool_limits),
            registry=sub_registry, ctx=ctx, state=sub_state, cancelled=parent_ctx.cancelled,
        ))
        ending, summary = outcome.ending, outcome.last_text
        if isinstance(ending, Cancelled):
            summary, is_error = "The subagent was cancelled.", True
        elif isinstance(ending, MaxSteps):
            summary = (summary + "\n\n" if summary else "") + f"(stopped after {limit} steps; the task may be unfinished)"
        elif isinstance(ending, Failed):
            raise ending.error
    except asyncio.CancelledError:
        # stopped from outside (a coordinator timeout, task_stop, shutdown): watchers still see it end
        stop = Subagent(
            id=sub_id, phase="stop", task=task, parent_tool_call_id=parent_ctx.tool_call_id,
            summary="The subagent was stopped before it finished.", is_error=True,
        )
        try:
            await parent_emit(stop)
        except Exception:  # noqa: BLE001 - the parent's stream may be gone already
            pass
        hooks.fire_and_forget(HookEventName.SUBAGENT_STOP, {**hook_base, "summary": stop.summary, "is_error": True})
        raise
    except Exception as exc:  # noqa: BLE001 - the parent gets an error result, not a crash
        summary = f"The subagent failed: {exc}" if isinstance(exc, AstroError) else f"The subagent failed: {type(exc).__name__}: {exc}"
        is_error = True
    if not summary:
        summary, is_error = "The subagent produced no answer.", True
    await hooks.run(HookEventName.SUBAGENT_STOP, {**hook_base, "summary": summary, "is_error": is_error})
    await parent_emit(
        Subagent(id=sub_id, phase="stop", task=task, parent_tool_call_id=parent_ctx.tool_call_id, summary=summary, is_error=is_error)
    )
    return SubagentResult(summary=summary, is_error=is_error, steps=sub_state.step, subagent_id=sub_id)
