"""The floor of benchmarks/bench_mcp.py: the official SDK's server over our stdio transport
(``run_stdio``) with one tool that does nothing. What a call costs here no server of ours can go
below: the client, the SDK's dispatch and two pipe hops."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mcp_types as types  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402

from astro_jupyter.mcp.server import run_stdio  # noqa: E402

TOOL = types.Tool(name="query_target", description="does nothing", input_schema={
    "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text="ok")], is_error=False)


if __name__ == "__main__":
    asyncio.run(run_stdio(Server("floor", on_list_tools=list_tools, on_call_tool=call_tool)))
