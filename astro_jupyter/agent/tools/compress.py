"""``compress_context``: ask for a manual compaction before the next model call.

The tool only sets a flag on the run state (``RunScope.request_compaction``) (idempotent: calling it twice compacts once);
the runtime applies it through ``agent/compaction.py`` before the next LLM request. Manual
compaction is not subject to the circuit breaker that guards automatic compaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ...config import AstroConfig


class CompressContextTool(AgentTool):
    name = "compress_context"
    defer_loading = True
    description = (
        "Compress the conversation before the next step: older messages are summarised and recently read "
        "files restored. Use when the context is long and earlier details are no longer needed verbatim."
    )
    parameters = {
        "type": "object",
        "properties": {"focus": {"type": "string", "description": "What the summary must keep (optional)."}},
    }
    interrupt_behavior = InterruptBehavior.CANCEL
    agent_step = True
    lead_only = True

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if ctx.subagent_id:
            return ToolOutput.error("compress_context is not available in a subagent (its context is short-lived)")
        if ctx.scope is None:
            return ToolOutput.error("compress_context needs a running agent loop (no run state)")
        already = ctx.scope.request_compaction(str(args.get("focus") or "").strip())
        note = " (already scheduled)" if already else ""
        return ToolOutput(f"Context compaction scheduled before the next model call{note}.", metadata={"scheduled": True})


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [CompressContextTool()]
