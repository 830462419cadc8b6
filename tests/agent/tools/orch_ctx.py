"""A ToolContext for calling orchestration tools directly (events collected in a list).

Its run scope has a state and a registry but no subagent runner: tools that start subagents
report that they need a running agent loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from astro_jupyter.agent.run import RunState
from astro_jupyter.agent.run import RunScope
from astro_jupyter.agent.tools.base import ToolContext
from astro_jupyter.agent.tools.file_state import FileStateCache
from astro_jupyter.agent.tools.registry import ToolRegistry
from astro_jupyter.events import Event


def make_ctx(
    services: Any,
    *,
    session_id: str = "ses_test",
    state: RunState | None = None,
    registry: ToolRegistry | None = None,
    **kw: Any,
) -> tuple[ToolContext, list[Event]]:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    run_state = state if state is not None else RunState(run_id=str(kw.get("run_id", "")), session_id=session_id)
    ctx = ToolContext(
        config=services.config,
        services=services,
        session_id=session_id,
        cancelled=asyncio.Event(),
        emit=emit,
        file_state=FileStateCache(),
        scope=RunScope(state=run_state, registry=registry if registry is not None else ToolRegistry([])),
        **kw,
    )
    return ctx, events
