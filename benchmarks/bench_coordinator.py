"""Coordinator figures: 8 delegated tasks of equal cost, worker pool vs the same tasks serially.

Run: ``python benchmarks/bench_coordinator.py [--tasks 8] [--cost 0.25] [--repeat 3]`` from the
checkout. A full coordinator run goes through the real runtime, LLM client (openai) and store
against the scripted fake OpenAI server (tests/fakes) on loopback: the coordinator delegates N
tasks in one turn, then ``synthesize`` waits for them. Each worker is a one-step subagent whose
LLM answer takes ``--cost`` seconds (the fake server's delay), so a task's cost is dominated by
the model, as in real use. "serial" is the same run with a pool of one worker; the ratio column is
wall(pool) / wall(serial) (ideal: ceil(N / pool) / N).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from astro_jupyter.agent.runtime import AgentRuntime  # noqa: E402
from astro_jupyter.agent.tools.registry import ToolRegistry  # noqa: E402
from astro_jupyter.config import AstroConfig  # noqa: E402
from astro_jupyter.services.container import ServiceContainer, Tuning  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer, ScriptedCall, Turn  # noqa: E402

WORKER_MARK = "worker of an astro-jupyter coordinator"


def responder(n_tasks: int, cost: float) -> Any:
    def respond(body: dict[str, Any]) -> Turn:
        messages = body["messages"]
        if WORKER_MARK in messages[0]["content"]:
            return Turn.say(f"result of {messages[1]['content']}", first_delay=cost, chunk_size=64)
        tool_msgs = [m for m in messages if m.get("role") == "tool"]
        if not tool_msgs:
            calls = [ScriptedCall("delegate_task", {"description": f"task {i}"}, id=f"d{i}") for i in range(n_tasks)]
            return Turn.calls_(*calls)
        if not any(m.get("tool_call_id") == "syn" for m in tool_msgs):
            return Turn.call("synthesize", {}, id="syn")
        return Turn.say("combined", chunk_size=64)

    return respond


async def one_run(server: FakeOpenAIServer, workers: int, n_tasks: int, cost: float) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as home:
        config = AstroConfig(
            home=home, project_root=home, openai_base_url=server.url, openai_api_key="k",
            coordinator_workers=workers,
        )
        services = ServiceContainer(config, tuning=Tuning(delegated_task_secs=120.0))
        await services.start()
        runtime = AgentRuntime(services, registry=ToolRegistry())
        try:
            server.respond_with(responder(n_tasks, cost))
            t0 = time.perf_counter()
            handle = await runtime.start_run("do the tasks", coordinator=True)
            done = await handle.wait()
            wall = time.perf_counter() - t0
            assert done.reason == "finished", done
            rows = await services.coordinator_tasks.list(handle.session_id)
            completed = sum(r.status == "completed" for r in rows)
        finally:
            await runtime.close()
            await services.close()
    return wall, completed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--cost", type=float, default=0.25, help="seconds of model time per task")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pools", default="1,2,4,8")
    args = parser.parse_args()
    server = FakeOpenAIServer().start()
    try:
        await one_run(server, 2, 2, 0.0)  # warm-up: imports, first connection
        results: dict[int, list[float]] = {}
        for workers in [int(p) for p in args.pools.split(",")]:
            for _ in range(args.repeat):
                wall, completed = await one_run(server, workers, args.tasks, args.cost)
                assert completed == args.tasks, f"only {completed}/{args.tasks} tasks completed"
                results.setdefault(workers, []).append(wall)
    finally:
        server.stop()
    serial = statistics.median(results[min(results)])
    print(f"coordinator: {args.tasks} delegated tasks x {args.cost:.2f} s model time each, median of {args.repeat} runs")
    print(f"{'pool':>6} {'wall s':>8} {'ratio vs serial':>16} {'ideal ratio':>12}")
    for workers, walls in sorted(results.items()):
        wall = statistics.median(walls)
        ideal = math.ceil(args.tasks / workers) / math.ceil(args.tasks / min(results))
        label = "serial" if workers == min(results) == 1 else str(workers)
        print(f"{label:>6} {wall:8.3f} {wall / serial:16.3f} {ideal:12.3f}")


if __name__ == "__main__":
    asyncio.run(main())
