"""Fixtures for the filesystem tools: a sandbox (project root + library) and a ``call`` helper.

``call(name, **args)`` runs a tool the way the agent does — through the ``ToolExecutor``
(validation, permissions, events) — and returns its ``ToolOutput``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from astro_jupyter.agent.tools.base import ToolContext, ToolOutput
from astro_jupyter.agent.tools.file_state import FileStateCache
from astro_jupyter.agent.tools.filesystem import tools
from astro_jupyter.agent.tools.registry import ToolRegistry
from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer


@dataclass
class Sandbox:
    config: AstroConfig
    project: Path
    home: Path
    outside: Path
    ctx: ToolContext
    registry: ToolRegistry
    events: list[Any] = field(default_factory=list)
    permission_answer: str = "allow"

    def ctx_tool(self, name: str) -> Any:
        return self.registry.get(name)

    async def call(self, name: str, **args: Any) -> ToolOutput:
        from astro_jupyter.agent.executor import ToolCallRequest, ToolExecutor
        from astro_jupyter.agent.permissions import PermissionChecker

        executor = ToolExecutor(self.registry, PermissionChecker.from_config(self.config), None, self.config)
        request = ToolCallRequest(id=f"call_{len(self.events)}", name=name, arguments_json=json.dumps(args))
        [done] = await executor.execute([request], self.ctx)
        return done.output


@pytest.fixture
def sandbox_base(tmp_path: Path) -> Sandbox:
    """The sandbox without services; the caller attaches a started container to ``ctx.services``."""
    project = tmp_path / "project"
    home = tmp_path / "home"
    outside = tmp_path / "outside"
    for d in (project, home, outside):
        d.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    config = AstroConfig(home=str(home), project_root=str(project))
    config.ensure_dirs()
    box: Sandbox

    async def emit(event: Any) -> None:
        box.events.append(event)

    async def ask_permission(request: Any) -> str:
        return box.permission_answer

    ctx = ToolContext(
        config=config,
        services=None,  # type: ignore[arg-type] - attached by the ``sandbox`` fixture
        session_id="s-test",
        cancelled=asyncio.Event(),
        emit=emit,
        file_state=FileStateCache(),
        ask_permission=ask_permission,
    )
    box = Sandbox(config, project, home, outside, ctx, ToolRegistry(tools(config)))
    return box


@pytest_asyncio.fixture
async def sandbox(sandbox_base: Sandbox) -> AsyncIterator[Sandbox]:
    """The sandbox with an open ServiceContainer (the executor writes the audit log through it)."""
    services = await ServiceContainer(sandbox_base.config).start()
    sandbox_base.ctx.services = services
    try:
        yield sandbox_base
    finally:
        await services.close()
