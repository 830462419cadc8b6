"""A ToolContext for calling orchestration tools directly (events collected in a list)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from astro_jupyter.agent.tools.base import ToolContext
from astro_jupyter.agent.tools.file_state import FileStateCache
from astro_jupyter.events import Event


def make_ctx(services: Any, *, session_id: str = "ses_test", run_state: Any = None, **kw: Any) -> tuple[ToolContext, list[Event]]:
    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    ctx = ToolContext(
        config=services.config,
        services=services,
        session_id=session_id,
        cancelled=asyncio.Event(),
        emit=emit,
        file_state=FileStateCache(),
        run_state=run_state if run_state is not None else SimpleNamespace(),
        **kw,
    )
    return ctx, events
