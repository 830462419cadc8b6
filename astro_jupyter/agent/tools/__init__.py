"""The tool families. Each family module exposes ``tools(config) -> list[AgentTool]``."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .base import AgentTool, InterruptBehavior, PermissionRule, ToolContext, ToolOutput
from .registry import ToolRegistry

if TYPE_CHECKING:
    from ...config import AstroConfig

__all__ = [
    "AgentTool",
    "InterruptBehavior",
    "PermissionRule",
    "ToolContext",
    "ToolOutput",
    "ToolRegistry",
    "build_default_registry",
]

# Module paths (relative to this package) of every family in the standard research agent.
FAMILIES: tuple[str, ...] = (
    ".astro.target",
    ".astro.search",
    ".astro.metadata",
    ".astro.download",
    ".astro.paper",
    ".astro.rag",
    ".astro.note",
    ".filesystem",
    ".todo",
    ".compress",
    ".skill",
    ".memory",
    ".ask_user",
    ".search_history",
    ".subagent",
    ".background",
    ".team",
    ".load_tool",
    ".notebook",
    ".data.tap",
    ".data.object_papers",
    ".data.bibtex",
)

# Coordinator meta-tools are added only to sessions in coordinator mode.
COORDINATOR_FAMILY = ".coordinator"


def family_tools(module: str, config: "AstroConfig") -> list[AgentTool]:
    mod = importlib.import_module(module, __name__)
    return list(mod.tools(config))


def build_default_registry(config: "AstroConfig", *, coordinator: bool = False) -> ToolRegistry:
    registry = ToolRegistry()
    for module in FAMILIES + ((COORDINATOR_FAMILY,) if coordinator else ()):
        for tool in family_tools(module, config):
            registry.add(tool)
        # tools a family has but this surface cannot offer (kernel_* outside a kernel): a call gets the reason
        unavailable = getattr(importlib.import_module(module, __name__), "unavailable", None)
        for name, reason in (unavailable(config) if unavailable else {}).items():
            registry.mark_unavailable(name, reason)
    return registry
