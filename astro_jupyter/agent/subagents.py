"""Starting subagents from tools: step limits, restricted registries, result shaping.

The loop itself is ``AgentRuntime.run_subagent`` (isolated messages, silent context, the
parent's permission checker and hooks, Subagent start/stop events tagged with the
subagent id). This module is what the ``subagent``, ``load_skill`` (fork), teammate,
coordinator-worker and compaction-memory-bridge callers share: the max_steps rule
(default ``subagent_max_steps``, a request above ``subagent_step_limit`` is an error, not
silently clamped) and the restricted registries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from ..errors import InvalidInput

if TYPE_CHECKING:
    from ..config import AstroConfig
    from .tools.base import ToolContext
    from .tools.registry import ToolRegistry

MEMORY_BRIDGE_EXTRA = ("save_memory",)


class SubagentLimitError(InvalidInput):
    """A max_steps request outside the allowed range; the message is for the model."""


@dataclass(frozen=True)
class SubagentOutcome:
    summary: str
    is_error: bool
    steps: int
    subagent_id: str


def resolve_max_steps(config: "AstroConfig", requested: Any) -> int:
    if requested is None or requested == "":
        return int(config.subagent_max_steps)
    try:
        steps = int(requested)
    except (TypeError, ValueError):
        raise SubagentLimitError(f"max_steps must be an integer, got {requested!r}") from None
    if isinstance(requested, float) and requested != steps:
        raise SubagentLimitError(f"max_steps must be an integer, got {requested!r}")
    limit = int(config.subagent_step_limit)
    if steps < 1:
        raise SubagentLimitError(f"max_steps must be at least 1, got {steps}")
    if steps > limit:
        raise SubagentLimitError(
            f"max_steps {steps} is above the limit of {limit} steps per subagent; split the task or ask for at most {limit}"
        )
    return steps


def parent_registry(ctx: "ToolContext") -> "ToolRegistry | None":
    """The registry of the run the caller belongs to (without the coordinator meta-tools)."""
    runtime = ctx.runtime
    if runtime is None:
        return None
    return getattr(runtime, "registry", None)


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
) -> SubagentOutcome:
    """Run a subagent through the runtime; only its summary comes back.

    Without ``registry`` the subagent gets the parent's tools minus those flagged ``lead_only``.
    """
    runtime = ctx.runtime
    if runtime is None or not hasattr(runtime, "run_subagent"):
        return SubagentOutcome("subagents need a running agent loop (no runtime in this context)", True, 0, "")
    if registry is not None:
        sub_registry = registry  # the caller built it (teammates, memory bridge)
    else:
        base = parent_registry(ctx)
        sub_registry = worker_registry(base) if base is not None else None
    result = await runtime.run_subagent(
        task, parent_ctx=ctx, max_steps=max_steps, registry=sub_registry, system_prompt=system_prompt
    )
    return SubagentOutcome(
        summary=str(getattr(result, "summary", "") or ""),
        is_error=bool(getattr(result, "is_error", False)),
        steps=int(getattr(result, "steps", 0) or 0),
        subagent_id=str(getattr(result, "subagent_id", "") or ""),
    )
