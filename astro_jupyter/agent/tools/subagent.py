"""``subagent``: hand a self-contained task to an isolated agent; only its summary comes back.

The subagent has a fresh context (the parent's long history does not leak in and its own
tool chatter does not flow back), the parent's tools minus the interactive and nesting
ones, and the same permission checker and hooks. Its events stream to the parent's
watchers tagged with its id, between ``subagent`` start/stop events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..subagents import SubagentLimitError, resolve_max_steps, spawn
from .base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ...config import AstroConfig


class SubagentTool(AgentTool):
    name = "subagent"
    defer_loading = True
    description = (
        "Delegate a self-contained task to a subagent with its own context and the same tools; only its final "
        "summary is returned. Good for searches or reading that would flood this conversation. "
        "max_steps defaults to 5 and may be at most 10."
    )
    parameters = {
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "Everything the subagent needs to know; it cannot see this chat."},
            "max_steps": {"type": "integer", "description": "LLM turns allowed (default 5, at most 10)."},
        },
        "required": ["task"],
    }
    interrupt_behavior = InterruptBehavior.BLOCK
    agent_step = True
    lead_only = True
    top_level_only = True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        task = str(args.get("task") or "").strip()
        if not task:
            return ToolOutput.error("subagent needs a task description")
        try:
            steps = resolve_max_steps(args.get("max_steps"))
        except SubagentLimitError as exc:
            return ToolOutput.error(str(exc))
        if ctx.subagent_id:
            return ToolOutput.error("a subagent cannot start another subagent; do the work directly")
        outcome = await spawn(ctx, task, max_steps=steps)
        meta = {"subagent_id": outcome.subagent_id, "steps": outcome.steps, "max_steps": steps}
        if outcome.is_error:
            return ToolOutput.error(outcome.summary, **meta)
        return ToolOutput(outcome.summary, metadata=meta)


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [SubagentTool()]
