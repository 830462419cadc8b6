"""``load_tool``: bring a deferred tool's definition into the conversation.

The first prompt carries only the resident tools' definitions plus a catalog (name and a
one-line summary of every tool). Heavy or niche tools (``defer_loading``) are loaded on
demand: this tool records their names in the run scope's ``loaded_tools`` and the loop adds
their definitions to the next LLM request (``loop.tool_definitions``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ...config import AstroConfig
    from .registry import ToolRegistry


def run_registry(ctx: ToolContext) -> "ToolRegistry | None":
    """The tools of the caller's loop (a subagent's own subset); None outside an agent loop."""
    return ctx.scope.registry if ctx.scope is not None else None


class LoadToolTool(AgentTool):
    name = "load_tool"
    description = (
        "Load the definition of a deferred tool listed in the tool catalog so it can be called from the next step."
    )
    parameters = {
        "type": "object",
        "properties": {
            "names": {"type": "array", "items": {"type": "string"}, "description": "Tool names from the catalog."}
        },
        "required": ["names"],
    }
    interrupt_behavior = InterruptBehavior.CANCEL
    agent_step = True

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        names = args.get("names")
        if isinstance(names, str):
            names = [names]
        names = [str(n).strip() for n in (names or []) if str(n).strip()]
        if not names:
            return ToolOutput.error("load_tool needs at least one tool name from the catalog")
        if ctx.scope is None:
            return ToolOutput.error("load_tool needs a running agent loop (no tool registry in this context)")
        registry = ctx.scope.registry
        deferred = sorted(t.name for t in registry.sorted_tools() if t.defer_loading)
        loaded = ctx.scope.loaded_tools
        done, already, resident, unknown = [], [], [], []
        for name in names:
            tool = registry.get(name)
            if tool is None:
                unknown.append(name)
            elif not tool.defer_loading:
                resident.append(name)
            elif name in loaded:
                already.append(name)
            else:
                loaded.add(name)
                done.append(name)
        if unknown and not (done or already or resident):
            return ToolOutput.error(
                f"unknown tool(s): {', '.join(unknown)}; deferred tools you can load: {', '.join(deferred) or 'none'}"
            )
        parts = []
        if done:
            parts.append(f"Loaded {', '.join(done)}: callable from the next step.")
        if already:
            parts.append(f"Already loaded: {', '.join(already)}.")
        if resident:
            parts.append(f"Always available (no loading needed): {', '.join(resident)}.")
        if unknown:
            parts.append(f"Unknown: {', '.join(unknown)} (deferred tools: {', '.join(deferred)}).")
        return ToolOutput(" ".join(parts), metadata={"loaded": done, "loaded_tools": sorted(loaded)})


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [LoadToolTool()]
