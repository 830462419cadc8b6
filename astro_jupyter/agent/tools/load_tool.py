"""``load_tool``: bring a deferred tool's definition into the conversation.

The first prompt carries only the resident tools' definitions plus a catalog (name and a
one-line summary of every tool). Heavy or niche tools (``defer_loading``) are loaded on
demand: this tool records their names in ``run_state.loaded_tools`` and the runtime adds
their definitions to the next LLM request (``loop.tool_definitions``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ...config import AstroConfig
    from .registry import ToolRegistry


def loaded_tools(run_state: Any) -> set[str]:
    """The run's set of loaded deferred tools (created on first use)."""
    current = getattr(run_state, "loaded_tools", None)
    if current is None:
        current = set()
        setattr(run_state, "loaded_tools", current)
    return current


def run_registry(ctx: ToolContext) -> "ToolRegistry | None":
    """The tools of the caller's loop: a subagent's own subset, else the runtime's registry."""
    extra = getattr(ctx.run_state, "extra", None)
    own = extra.get("registry") if isinstance(extra, dict) else None
    return own or getattr(ctx.run_state, "registry", None) or getattr(ctx.runtime, "registry", None)


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
        registry = run_registry(ctx)
        if registry is None or ctx.run_state is None:
            return ToolOutput.error("load_tool needs a running agent loop (no tool registry in this context)")
        deferred = sorted(t.name for t in registry.sorted_tools() if t.defer_loading)
        loaded = loaded_tools(ctx.run_state)
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
