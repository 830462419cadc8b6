"""Small tools and a recording context for the executor tests (imported by test_executor*.py)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from astro_jupyter.agent.executor import ExecutedCall, ToolCallRequest, ToolExecutor, ToolLimits
from astro_jupyter.agent.hooks import HookRegistry
from astro_jupyter.agent.permissions import PermissionChecker
from astro_jupyter.agent.tools.base import AgentTool, InterruptBehavior, PermissionRule, ToolContext, ToolOutput
from astro_jupyter.agent.tools.file_state import FileStateCache
from astro_jupyter.agent.tools.registry import ToolRegistry
from astro_jupyter.events import Event


@dataclass
class Timeline:
    """Start/end times of every tool execution, to assert overlap as a user would observe it;
    and events to wait on (a call started or ended) and to end a gated call (``release``)."""

    spans: dict[str, list[float]] = field(default_factory=dict)
    events: dict[str, asyncio.Event] = field(default_factory=dict)

    def _event(self, name: str) -> asyncio.Event:
        return self.events.setdefault(name, asyncio.Event())

    def start(self, key: str) -> None:
        self.spans[key] = [time.perf_counter(), float("nan")]
        self._event(f"start:{key}").set()

    def end(self, key: str) -> None:
        self.spans[key][1] = time.perf_counter()
        self._event(f"end:{key}").set()

    async def started(self, *keys: str, timeout: float = 10) -> None:
        await asyncio.wait_for(asyncio.gather(*(self._event(f"start:{k}").wait() for k in keys)), timeout)

    async def ended(self, *keys: str, timeout: float = 10) -> None:
        await asyncio.wait_for(asyncio.gather(*(self._event(f"end:{k}").wait() for k in keys)), timeout)

    def release(self, key: str) -> None:
        """Let the gated call ``key`` finish."""
        self._event(f"release:{key}").set()

    async def gate(self, key: str) -> None:
        await self._event(f"release:{key}").wait()

    def overlap(self, a: str, b: str) -> bool:
        (s1, e1), (s2, e2) = self.spans[a], self.spans[b]
        return s1 < e2 and s2 < e1

    def before(self, a: str, b: str) -> bool:
        """``a`` ended before ``b`` started."""
        return self.spans[a][1] <= self.spans[b][0]


async def settle(cycles: int = 50) -> None:
    """Let every ready task run a while (for "this did not happen" checks; no clock involved)."""
    for _ in range(cycles):
        await asyncio.sleep(0)


class SleepTool(AgentTool):
    """Sleeps ``secs`` (default 0.1), or with ``gated`` until the test releases it, and echoes ``tag``;
    safety and interrupt behaviour per instance."""

    description = "Sleep a while and echo the tag."
    parameters = {
        "type": "object",
        "properties": {"tag": {"type": "string"}, "secs": {"type": "number", "minimum": 0}, "gated": {"type": "boolean"}},
        "required": ["tag"],
    }

    def __init__(
        self,
        name: str,
        timeline: Timeline,
        *,
        safe: bool = True,
        interrupt: InterruptBehavior = InterruptBehavior.CANCEL,
        readonly: bool = False,
        rules: list[PermissionRule] | None = None,
        fail: bool = False,
        sibling_abort: bool = False,
    ) -> None:
        self.name = name  # type: ignore[misc]
        self.timeline = timeline
        self.safe = safe
        self.interrupt_behavior = interrupt  # type: ignore[misc]
        self.is_readonly = readonly  # type: ignore[misc]
        self.rules = rules or []
        self.fail = fail
        self.causes_sibling_abort = sibling_abort  # type: ignore[misc]
        self.finished: list[str] = []

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return self.safe and not args.get("exclusive", False)

    def check_permissions(self, args: dict[str, Any]) -> list[PermissionRule]:
        return list(self.rules)

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        tag = args["tag"]
        self.timeline.start(tag)
        try:
            if args.get("gated"):
                await self.timeline.gate(tag)
            else:
                await asyncio.sleep(float(args.get("secs", 0.1)))
        finally:
            self.timeline.end(tag)
        if self.fail:
            return ToolOutput.error(f"{self.name} {tag} broke")
        self.finished.append(tag)
        return ToolOutput(f"{self.name}:{tag}", metadata={"tag": tag})


class EchoTool(AgentTool):
    name = "echo"
    description = "Echo the text back."
    parameters = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["text"],
        "additionalProperties": False,
    }
    is_readonly = True

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput(args["text"] * int(args.get("count", 1)))


class BoomTool(AgentTool):
    name = "boom"
    description = "Raise an exception."
    parameters = {"type": "object", "properties": {}}

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        raise KeyError("no such key: 'flux'")


class ProgressTool(AgentTool):
    name = "progress"
    description = "Report progress three times."
    parameters = {"type": "object", "properties": {}}

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput("no progress")

    async def execute_with_progress(self, args: dict[str, Any], ctx: ToolContext, progress: Any) -> ToolOutput:
        for i in range(1, 4):
            await progress(done=i, total=3, message=f"page {i}")
        return ToolOutput("3 pages")


class Recorder:
    """Collects emitted events, optionally reacting to each one."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.on_event: Callable[[Event], Awaitable[None]] | None = None

    async def __call__(self, event: Event) -> None:
        self.events.append(event)
        if self.on_event is not None:
            await self.on_event(event)

    def of(self, type_: str) -> list[Any]:
        return [e for e in self.events if e.type == type_]


def make_ctx(services: Any, recorder: Recorder, **kw: Any) -> ToolContext:
    return ToolContext(
        config=services.config,
        services=services,
        session_id=kw.pop("session_id", "s1"),
        cancelled=asyncio.Event(),
        emit=recorder,
        file_state=FileStateCache(),
        run_id=kw.pop("run_id", "r1"),
        step=kw.pop("step", 1),
        **kw,
    )


def make_executor(
    services: Any,
    tools: list[AgentTool],
    *,
    rules: list[dict[str, Any]] | None = None,
    mode: str = "ask",
    hooks: HookRegistry | None = None,
    limits: ToolLimits | None = None,
) -> ToolExecutor:
    return ToolExecutor(ToolRegistry(tools), PermissionChecker(rules or [], mode), hooks or HookRegistry(), services.config,
                        limits)


def call(name: str, args: str, id: str | None = None, _n: list[int] = [0]) -> ToolCallRequest:
    _n[0] += 1
    return ToolCallRequest(id=f"call_{_n[0]}" if id is None else id, name=name, arguments_json=args)


def contents(results: list[ExecutedCall]) -> list[str]:
    return [r.output.content for r in results]
