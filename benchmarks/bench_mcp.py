"""MCP figure (issue 26): the overhead of calling a tool through ``astro-jupyter mcp`` over stdio,
against calling the same tool in-process through the application layer. Goal: p50 <= 5 ms.

Run: ``python benchmarks/bench_mcp.py [--calls 200]`` (from the checkout). One ASTRO_HOME, the fake
CDS Sesame on loopback (tests/fakes), ``query_target`` on a name already resolved once (so every path
is served from the library's cache and the figure is the front end's cost, not the network's).

Paths, measured interleaved (one call of each per round, the order rotating every round, so a
change of load on this shared machine falls on all of them alike):
- in-process: ``AstroApp.run_tool`` (what ``%astro`` and ``astro-jupyter tool`` do): the issue's baseline;
- in-process, stored as a session: ``run_tool_as_session`` (the MCP server's own work, no protocol);
- MCP: the official SDK's client over stdio to ``astro-jupyter mcp`` (which stores each call as a session:
  a read-only one like this while its answer is on the way, see astro_jupyter/mcp/server.py);
- floor: the same client and transport to the SDK's server with a tool that does nothing
  (benchmarks/mcp_floor_server.py): what no server of ours can go below.
The issue's figure is MCP p50 - in-process p50; the floor splits it into the protocol's share and ours.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp import Client, StdioServerParameters  # noqa: E402

from astro_jupyter.app import AstroApp  # noqa: E402
from astro_jupyter.config import AstroConfig  # noqa: E402
from tests.fakes.sesame_server import FakeSesameServer  # noqa: E402

ARGS = {"name": "M 31"}
GOAL_MS = 5.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def stdio(env: dict[str, str], *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=list(args), env=env, cwd=str(ROOT))


async def timed(call: Callable[[], Awaitable[Any]], check: Callable[[Any], bool]) -> float:
    t = time.perf_counter()
    result = await call()
    elapsed = (time.perf_counter() - t) * 1000
    assert check(result), result
    return elapsed


async def measure(home: Path, sesame_url: str, rounds: int) -> dict[str, list[float]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_", "ASTRO_"))}
    env.update(ASTRO_HOME=str(home), ASTRO_SESAME_URL=sesame_url, PYTHONPATH=str(ROOT))
    async with contextlib.AsyncExitStack() as stack:
        app = await stack.enter_async_context(AstroApp(AstroConfig(home=str(home), service_urls={"sesame": sesame_url}),
                                                       source="bench"))
        ours = await stack.enter_async_context(Client(stdio(env, "-m", "astro_jupyter.cli", "mcp"), cache=None))
        floor = await stack.enter_async_context(Client(stdio(env, str(ROOT / "benchmarks" / "mcp_floor_server.py")),
                                                       cache=None))
        paths: dict[str, Callable[[], Awaitable[float]]] = {
            "in-process run_tool": lambda: timed(lambda: app.run_tool("query_target", ARGS), lambda r: not r.is_error),
            "in-process, stored as a session": lambda: timed(
                lambda: app.run_tool_as_session("query_target", ARGS, source="bench", title_prefix="bench"),
                lambda r: not r[0].is_error),
            "MCP over stdio": lambda: timed(lambda: ours.call_tool("query_target", ARGS), lambda r: not r.is_error),
            "floor: SDK, do-nothing tool": lambda: timed(lambda: floor.call_tool("query_target", ARGS),
                                                         lambda r: not r.is_error),
        }
        for _ in range(10):  # warm: imports, the cache row, the first session rows, the runtimes
            for run in paths.values():
                await run()
        times: dict[str, list[float]] = {label: [] for label in paths}
        order = list(paths)
        for i in range(rounds):
            for label in order[i % len(order):] + order[:i % len(order)]:
                times[label].append(await paths[label]())
    return times


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200, help="rounds (one call of each path per round)")
    opts = parser.parse_args()
    load_before = os.getloadavg()[0]
    sesame = FakeSesameServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            async with AstroApp(AstroConfig(home=str(home), service_urls={"sesame": sesame.url}), source="bench") as app:
                await app.run_tool("query_target", ARGS)  # resolve once: the cache serves the rest
            times = await measure(home, sesame.url, opts.calls)
    finally:
        sesame.stop()
    load_after = os.getloadavg()[0]
    print(f"query_target (cached), {opts.calls} rounds, the paths interleaved")
    print(f"{'path':<34} {'p50 ms':>8} {'p90 ms':>8} {'mean ms':>8}")
    for label, values in times.items():
        print(f"{label:<34} {statistics.median(values):8.2f} {pct(values, 0.9):8.2f} {statistics.fmean(values):8.2f}")
    p50 = {label: statistics.median(values) for label, values in times.items()}
    plain, mcp, floor = p50["in-process run_tool"], p50["MCP over stdio"], p50["floor: SDK, do-nothing tool"]
    overhead = mcp - plain
    paired = statistics.median(m - p for m, p in zip(times["MCP over stdio"], times["in-process run_tool"]))
    print(f"MCP overhead over in-process p50: {overhead:.2f} ms (goal <= {GOAL_MS:g} ms: "
          f"{'met' if overhead <= GOAL_MS else 'NOT met'}); median of the per-round differences {paired:.2f} ms; "
          f"ratio MCP/in-process p50 {mcp / plain:.2f}x")
    print(f"of which the floor (SDK client + SDK server + stdio, a tool that does nothing) {floor:.2f} ms, "
          f"and our server above the floor and the tool itself {mcp - floor - plain:.2f} ms; "
          f"ratio MCP/floor p50 {mcp / floor:.2f}x")
    print(f"load average {load_before:.1f} before, {load_after:.1f} after, on {os.cpu_count()} cores "
          "(a busy machine inflates every cross-process hop)")


if __name__ == "__main__":
    asyncio.run(main())
