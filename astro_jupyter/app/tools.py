"""Direct tool calls (``%astro TOOL``, ``astro-jupyter tool``): the one place a call outside a run
gets its ``ToolContext`` and ``ToolExecutor``, so every front end runs a tool through the same
pipeline (validation, permissions, hooks, audit) and answers its permission question the same way."""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from .common import AppBase

if TYPE_CHECKING:
    from ..agent.runtime import AgentRuntime
    from ..agent.tools.base import Emit, ToolContext
    from ..config import AstroConfig
    from ..events import Event
    from ..services.container import ServiceContainer
    from .follow import Answerer

_CALL_IDS = itertools.count(1)
MCP_PREFIX = "mcp__"  # tools of outside MCP servers (agent/tools/mcp.py)


@dataclass
class ToolRun:
    """One direct tool call's outcome (what ``%astro TOOL`` returns before display wrapping, what the CLI prints)."""

    tool: str
    arguments: dict[str, Any] | None
    content: str
    is_error: bool
    metadata: dict[str, Any]
    duration_ms: int
    events: list[Any] = field(default_factory=list)
    call_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The tool output's wire shape (``astro-jupyter tool --json``)."""
        return {"content": self.content, "is_error": self.is_error, "metadata": self.metadata}


def direct_context(
    *,
    config: "AstroConfig",
    services: "ServiceContainer",
    emit: "Emit",
    cancelled: asyncio.Event,
    run_id: str,
    session_id: str = "",
    runtime: "AgentRuntime | None" = None,
    answerer: "Answerer | None" = None,
    unattended: Any = None,
) -> "ToolContext":
    """The context of a call outside any run. With no ``answerer`` a permission the rules leave at Ask is denied."""
    from ..agent.tools.base import ToolContext
    from ..agent.tools.file_state import FileStateCache

    return ToolContext(
        config=config, services=services, session_id=session_id, cancelled=cancelled, emit=emit,
        file_state=FileStateCache(), run_id=run_id,
        scope=runtime.tool_scope(session_id, run_id) if runtime is not None else None,
        ask_permission=answerer.answer if answerer is not None else None,
        unattended=unattended,
    )


def standard_registry(config: "AstroConfig") -> Any:
    """The standard tools' declarations without a runtime or an open store (their schemas, for a
    front end that must list them before anything starts)."""
    from ..agent.tools import build_default_registry

    return build_default_registry(config)


class ToolsMixin(AppBase):
    def tool_registry(self) -> Any:
        """The tools this front end offers (the runtime's registry: the kernel adds kernel_inspect / kernel_run)."""
        return self.runtime.registry

    async def run_tool(
        self,
        name: str,
        arguments: dict[str, Any] | str,
        *,
        answerer: "Answerer | None" = None,
        on_event: Callable[["Event"], None] | None = None,
        cancelled: asyncio.Event | None = None,
        session_id: str = "",
        run_id: str = "direct",
        unattended: Any = None,
    ) -> ToolRun:
        """Run one tool through the executor; ``on_event`` sees its progress/error events as they happen.

        A fresh executor per call: its loop detector is for an agent repeating itself, while a
        person re-running a cell means it. What the call started for ``run_id`` (a kernel for
        ``notebook_run``) is released when it ends."""
        from ..agent.executor import ToolCallRequest, ToolExecutor

        runtime = self.runtime
        executor = ToolExecutor(runtime.registry, runtime.permissions, runtime.hooks, self.config, runtime.tool_limits)
        events: list[Any] = []

        async def emit(event: "Event") -> None:
            events.append(event)
            if on_event is not None:
                on_event(event)

        ctx = direct_context(
            config=self.config, services=self.services, emit=emit, cancelled=cancelled or asyncio.Event(),
            run_id=run_id, session_id=session_id, runtime=runtime, answerer=answerer, unattended=unattended,
        )
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        call_id = f"{run_id}_{next(_CALL_IDS)}"
        if name.startswith(MCP_PREFIX) and name not in runtime.registry:  # an outside server's tool: list it first
            from ..agent.tools.mcp import install

            await install(runtime.registry, self.services)
        try:
            [done] = await executor.execute([ToolCallRequest(call_id, name, raw)], ctx)
        finally:
            await self.services.release_run(run_id)
        return ToolRun(name, done.arguments, done.output.content, done.output.is_error,
                       dict(done.output.metadata), done.duration_ms, events, call_id)
