"""MCP figure: the overhead of calling a tool through ``astro-jupyter mcp`` over stdio, against
calling the same tool in-process through the application layer.

Run: ``python benchmarks/bench_mcp.py [--calls 200]`` (from the checkout). One ASTRO_HOME, the fake
CDS Sesame on loopback (tests/fakes), ``query_target`` on a name already resolved once (so both paths
are served from the library's cache and the figure is the front end's cost, not the network's).
In-process is ``AstroApp.run_tool`` (what ``%astro`` and ``astro-jupyter tool`` do); the MCP path is
the official SDK's client over stdio to ``astro-jupyter mcp``, which also stores each call as a
session. Goal: MCP p50 - in-process p50 <= 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp import Client, StdioServerParameters  # noqa: E402

from astro_jupyter.app import AstroApp  # noqa: E402
from astro_jupyter.config import AstroConfig  # noqa: E402
from tests.fakes.sesame_server import FakeSesameServer  # noqa: E402

ARGS = {"name": "M 31"}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def in_process(home: Path, sesame_url: str, calls: int) -> tuple[list[float], list[float]]:
    """Milliseconds per call: ``run_tool``, and ``run_tool_as_session`` (the MCP server's own work)."""
    config = AstroConfig(home=str(home), service_urls={"sesame": sesame_url})
    plain, recorded = [], []
    async with AstroApp(config, source="bench") as app:
        await app.run_tool("query_target", ARGS)  # resolve once: the cache serves the rest
        for _ in range(calls):
            t = time.perf_counter()
            run = await app.run_tool("query_target", ARGS)
            plain.append((time.perf_counter() - t) * 1000)
            assert not run.is_error, run.content
        for _ in range(calls):
            t = time.perf_counter()
            run, _ = await app.run_tool_as_session("query_target", ARGS, source="bench", title_prefix="bench")
            recorded.append((time.perf_counter() - t) * 1000)
    return plain, recorded


async def over_stdio(home: Path, sesame_url: str, calls: int) -> tuple[list[float], list[float]]:
    """Milliseconds per ``tools/call``, and per ``tools/list`` (a prepared answer: the round trip alone)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_", "ASTRO_"))}
    env.update(ASTRO_HOME=str(home), ASTRO_SESAME_URL=sesame_url, PYTHONPATH=str(ROOT))
    params = StdioServerParameters(command=sys.executable, args=["-m", "astro_jupyter.cli", "mcp"], env=env, cwd=str(ROOT))
    times, pings = [], []
    async with Client(params, cache=None) as client:  # no client-side cache: every list is a round trip
        await client.list_tools()
        for _ in range(10):  # warm: imports, the first session row, the runtime
            await client.call_tool("query_target", ARGS)
        for _ in range(calls):
            t = time.perf_counter()
            result = await client.call_tool("query_target", ARGS)
            times.append((time.perf_counter() - t) * 1000)
            assert not result.is_error, result.content
        for _ in range(calls):
            t = time.perf_counter()
            await client.list_tools()  # answered from a prepared list: the round trip alone
            pings.append((time.perf_counter() - t) * 1000)
    return times, pings


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    opts = parser.parse_args()
    sesame = FakeSesameServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp) / "home"
            plain, recorded = await in_process(home, sesame.url, opts.calls)
            mcp, pings = await over_stdio(home, sesame.url, opts.calls)
    finally:
        sesame.stop()
    rows = [("in-process run_tool", plain), ("in-process, stored as a session", recorded), ("MCP over stdio", mcp),
            ("MCP tools/list over stdio", pings)]
    print(f"query_target (cached), {opts.calls} calls each")
    print(f"{'path':<34} {'p50 ms':>8} {'p90 ms':>8} {'mean ms':>8}")
    for label, values in rows:
        print(f"{label:<34} {statistics.median(values):8.2f} {pct(values, 0.9):8.2f} {statistics.fmean(values):8.2f}")
    overhead = statistics.median(mcp) - statistics.median(plain)
    protocol = statistics.median(mcp) - statistics.median(recorded)
    print(f"MCP overhead over in-process p50: {overhead:.2f} ms (goal <= 5 ms: {'met' if overhead <= 5 else 'NOT met'}); "
          f"of which the protocol (over the same call stored as a session): {protocol:.2f} ms; "
          f"ratio MCP/in-process p50 {statistics.median(mcp) / statistics.median(plain):.2f}x; "
          f"a bare round trip (tools/list) costs {statistics.median(pings):.2f} ms p50 here")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a busy machine inflates every cross-process hop)")


if __name__ == "__main__":
    asyncio.run(main())
