"""Shared setup for the runtime tests: a container wired to the fake LLM and fake Sesame."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, AsyncIterator

from astro_jupyter.agent.runtime import AgentRuntime
from astro_jupyter.agent.tools.registry import ToolRegistry
from astro_jupyter.agent.tools.astro.target import QueryTargetTool
from astro_jupyter.config import AstroConfig
from astro_jupyter.events import Event, to_wire
from astro_jupyter.llm.client import LlmLimits
from astro_jupyter.services.container import ServiceContainer, Tuning

# internal tuning for tests (no settings): quick retries, short HTTP waits
FAST = Tuning(llm=LlmLimits(retry_base_delay=0.01), http_timeout_secs=2.0)


def fast(llm: dict[str, Any] | None = None, **kw: Any) -> Tuning:
    """``FAST`` with some knobs changed: ``fast({"max_retries": 0}, ask_user_secs=0.3)``."""
    return dataclasses.replace(FAST, llm=LlmLimits(**{"retry_base_delay": 0.01, **(llm or {})}), **kw)


def make_config(tmp_path: Path, llm_url: str, sesame_url: str = "http://127.0.0.1:9", **kw: Any) -> AstroConfig:
    defaults: dict[str, Any] = dict(
        home=str(tmp_path / "home"),
        project_root=str(tmp_path),
        openai_base_url=llm_url,
        openai_api_key="k",
        service_urls={"sesame": sesame_url},
    )
    defaults.update(kw)
    return AstroConfig(**defaults)


async def make_runtime(config: AstroConfig, *extra_tools: Any, hooks: Any = None,
                       tuning: Tuning = FAST) -> tuple[ServiceContainer, AgentRuntime]:
    services = ServiceContainer(config, tuning=tuning)
    await services.start()
    registry = ToolRegistry([QueryTargetTool(), *extra_tools])
    return services, AgentRuntime(services, registry=registry, hooks=hooks)


@contextlib.asynccontextmanager
async def running(config: AstroConfig, *extra_tools: Any, hooks: Any = None,
                  tuning: Tuning = FAST) -> AsyncIterator[tuple[ServiceContainer, AgentRuntime]]:
    """``make_runtime``, closed (runtime, then services) when the block ends, however it ends."""
    services, runtime = await make_runtime(config, *extra_tools, hooks=hooks, tuning=tuning)
    try:
        yield services, runtime
    finally:
        await runtime.close()
        await services.close()


async def collect(handle: Any, after_seq: int = 0) -> list[tuple[int, Event]]:
    return [item async for item in handle.events(after_seq)]


def wires(items: list[tuple[int, Event]]) -> list[dict[str, Any]]:
    return [to_wire(e) for _, e in items]


def types(items: list[tuple[int, Event]]) -> list[str]:
    return [e.type for _, e in items]
