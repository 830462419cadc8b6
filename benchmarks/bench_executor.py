"""Executor figures: parallel speed-up of concurrency-safe tools, and per-call overhead.

Run: ``python benchmarks/bench_executor.py`` (from the checkout). Uses a real
ServiceContainer in a temporary ASTRO_HOME, so the audit-log insert and event emission
of the real pipeline are included. Prints a table; the goal for 8 × 100 ms safe tools in
one turn is parallel wall ≤ 0.15 × serial wall.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from astro_jupyter.agent.executor import ToolCallRequest, ToolExecutor, ToolLimits  # noqa: E402
from astro_jupyter.agent.hooks import HookRegistry  # noqa: E402
from astro_jupyter.agent.permissions import PermissionChecker  # noqa: E402
from astro_jupyter.agent.tools.base import AgentTool, ToolContext, ToolOutput  # noqa: E402
from astro_jupyter.agent.tools.file_state import FileStateCache  # noqa: E402
from astro_jupyter.agent.tools.registry import ToolRegistry  # noqa: E402
from astro_jupyter.config import AstroConfig  # noqa: E402
from astro_jupyter.services.container import ServiceContainer  # noqa: E402


class Sleep(AgentTool):
    name = "sleep"
    description = "Sleep 100 ms (stands in for a network lookup)."
    parameters = {"type": "object", "properties": {"i": {"type": "integer"}, "secs": {"type": "number"}}}
    is_readonly = True

    def __init__(self, safe: bool) -> None:
        self.safe = safe

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return self.safe

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        await asyncio.sleep(float(args.get("secs", 0.1)))
        return ToolOutput(f"slept {args.get('i')}")


class Instant(AgentTool):
    name = "instant"
    description = "Return at once."
    parameters = {"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]}
    is_readonly = True

    def is_concurrency_safe(self, args: dict[str, Any]) -> bool:
        return True

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput(str(args["i"]))


async def _noop_emit(event: Any) -> None:
    return None


def _ctx(services: ServiceContainer) -> ToolContext:
    return ToolContext(config=services.config, services=services, session_id="bench", cancelled=asyncio.Event(),
                       emit=_noop_emit, file_state=FileStateCache(), run_id="bench-run", step=1)


def _executor(services: ServiceContainer, tool: AgentTool) -> ToolExecutor:
    return ToolExecutor(ToolRegistry([tool]), PermissionChecker([], "auto"), HookRegistry(), services.config,
                        ToolLimits(duplicate_threshold=0))  # the bench repeats calls on purpose


async def bench_parallel(services: ServiceContainer, n: int, repeats: int) -> tuple[float, float]:
    calls = [ToolCallRequest(f"c{i}", "sleep", f'{{"i": {i}, "secs": 0.1}}') for i in range(n)]
    serial, parallel = [], []
    for _ in range(repeats):
        ex = _executor(services, Sleep(safe=False))  # not concurrency-safe: partitioned one by one
        t = time.perf_counter()
        await ex.execute(calls, _ctx(services))
        serial.append(time.perf_counter() - t)
        ex = _executor(services, Sleep(safe=True))
        t = time.perf_counter()
        results = await ex.execute(calls, _ctx(services))
        parallel.append(time.perf_counter() - t)
        assert [r.output.content for r in results] == [f"slept {i}" for i in range(n)]
    return statistics.median(serial), statistics.median(parallel)


async def bench_overhead(services: ServiceContainer, per_turn: int, turns: int) -> tuple[float, float]:
    """µs per call: bare ``await tool.execute`` vs the whole executor pipeline."""
    tool = Instant()
    ctx = _ctx(services)
    t = time.perf_counter()
    for i in range(turns * per_turn):
        await tool.execute({"i": i}, ctx)
    bare = (time.perf_counter() - t) / (turns * per_turn) * 1e6
    ex = _executor(services, tool)
    calls = [ToolCallRequest(f"c{i}", "instant", f'{{"i": {i}}}') for i in range(per_turn)]
    await ex.execute(calls, ctx)  # warm-up
    t = time.perf_counter()
    for _ in range(turns):
        await ex.execute(calls, ctx)
    full = (time.perf_counter() - t) / (turns * per_turn) * 1e6
    return bare, full


async def bench_audit(services: ServiceContainer, n: int) -> float:
    """µs for one audit-log insert on its own (the largest single cost inside the pipeline)."""
    t = time.perf_counter()
    for i in range(n):
        await services.audit.record("tool_use", session_id="bench", tool_name="instant", tool_call_id=f"a{i}")
    return (time.perf_counter() - t) / n * 1e6


async def main(repeats: int, turns: int) -> None:
    with tempfile.TemporaryDirectory() as home:
        services = ServiceContainer(AstroConfig(home=home))
        await services.start()
        try:
            serial, parallel = await bench_parallel(services, 8, repeats)
            rows = [(per_turn, *await bench_overhead(services, per_turn, turns)) for per_turn in (1, 8)]
            audit_us = await bench_audit(services, turns)
        finally:
            await services.close()
    print("\n8 tools x 100 ms in one turn (median of %d)" % repeats)
    print(f"{'serial wall':>16} | {'parallel wall':>14} | {'ratio':>6} | goal")
    print(f"{serial * 1000:13.1f} ms | {parallel * 1000:11.1f} ms | {parallel / serial:6.3f} | <= 0.150")
    print(f"\nexecutor overhead per call, instant tool ({turns} turns; includes audit row + events)")
    print(f"{'calls/turn':>10} | {'bare await':>11} | {'executor':>10} | {'overhead':>10}")
    for per_turn, bare, full in rows:
        print(f"{per_turn:>10} | {bare:8.1f} µs | {full:7.1f} µs | {full - bare:7.1f} µs")
    print(f"one audit-log insert alone: {audit_us:.1f} µs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--turns", type=int, default=300)
    opts = parser.parse_args()
    asyncio.run(main(opts.repeats, opts.turns))
