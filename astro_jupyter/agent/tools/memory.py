"""``save_memory``: a durable fact for later sessions, through the write gate of services/memory.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import AgentTool, InterruptBehavior, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ...config import AstroConfig

CATEGORIES = ("fact", "preference", "project", "reference")


class SaveMemoryTool(AgentTool):
    name = "save_memory"
    defer_loading = True
    description = (
        "Remember one durable, specific fact across sessions (user preferences, project facts, key results "
        "with sources). Refused when too short, vague, transient or code-like, or when it repeats a stored memory."
    )
    parameters = {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "One self-contained fact, in prose."},
            "category": {"type": "string", "enum": list(CATEGORIES)},
        },
        "required": ["content"],
    }
    interrupt_behavior = InterruptBehavior.BLOCK

    def __init__(self, source: str = "tool") -> None:
        self.source = source  # "compaction" for the memory bridge's copy

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        content = str(args.get("content") or "")
        category = str(args.get("category") or "fact")
        if category not in CATEGORIES:
            return ToolOutput.error(f"category must be one of {', '.join(CATEGORIES)}, got {category!r}")
        result = await ctx.services.memories.save(  # memories belong to the Jupyter user of the run
            content, category=category, owner=ctx.owner, session_id=ctx.session_id, source=self.source
        )
        meta = {"status": result.status, "memory_id": result.memory_id, "similarity": round(result.similarity, 3)}
        if result.status == "rejected":
            return ToolOutput.error(f"memory not saved: {result.reason}", **meta)
        if result.status == "duplicate":
            return ToolOutput(f"Not saved again: {result.reason}", metadata=meta)
        return ToolOutput(f"Saved memory {result.memory_id}.", metadata=meta)


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [SaveMemoryTool()]
