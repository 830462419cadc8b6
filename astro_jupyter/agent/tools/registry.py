"""The set of tools a runtime offers, in a stable order (sorted names keep prompt caches warm)."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from .base import AgentTool


class ToolRegistry:
    def __init__(self, tools: Iterable[AgentTool] = ()) -> None:
        self._tools: dict[str, AgentTool] = {}
        self._unavailable: dict[str, str] = {}  # tools this surface cannot offer → why (told to a caller)
        for tool in tools:
            self.add(tool)

    def add(self, tool: AgentTool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._unavailable.pop(tool.name, None)

    def replace(self, tool: AgentTool) -> None:
        self._tools[tool.name] = tool
        self._unavailable.pop(tool.name, None)

    def mark_unavailable(self, name: str, reason: str) -> None:
        """A known tool this surface does not offer (e.g. kernel_run outside a kernel): not sent to
        the model, and a call to it is answered with ``reason`` instead of "unknown tool"."""
        if name not in self._tools:
            self._unavailable[name] = reason

    def unavailable_reason(self, name: str) -> str | None:
        return self._unavailable.get(name)

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> AgentTool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[AgentTool]:
        return iter(self.sorted_tools())

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def sorted_tools(self) -> list[AgentTool]:
        return [self._tools[name] for name in sorted(self._tools)]

    def definitions(self) -> list[dict[str, Any]]:
        return [tool.definition() for tool in self.sorted_tools()]

    def resident_definitions(self) -> list[dict[str, Any]]:
        return [tool.definition() for tool in self.sorted_tools() if not tool.defer_loading]

    def subset(self, names: Iterable[str]) -> "ToolRegistry":
        wanted = set(names)
        subset = ToolRegistry(t for t in self.sorted_tools() if t.name in wanted)
        subset._unavailable = dict(self._unavailable)
        return subset
