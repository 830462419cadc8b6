"""``astro-jupyter acp``: the agent for ACP clients (jupyter-ai 3, Zed, any Agent Client Protocol client).

A thin front end like the CLI: it runs in-process over ``astro_jupyter.app`` and speaks ACP over
stdio with the ``agent-client-protocol`` SDK. ``agent.py`` implements the protocol's agent side,
``updates.py`` maps our events to ``session/update``, ``transport.py`` keeps stdout for the
protocol and answers malformed lines. Documented in ``docs/acp.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..app import AstroApp


async def serve(app: "AstroApp", transport: Any = None) -> None:
    """Serve one client until it disconnects (stdio unless ``transport`` is given), then cancel
    the runs it left and let them store their end."""
    from acp.agent.connection import AgentSideConnection

    from .agent import AstroAcpAgent
    from .transport import StdioChannel

    channel = None
    if transport is None:
        channel = await StdioChannel.open()
        transport = channel.transport
    agent = AstroAcpAgent(app)
    conn = AgentSideConnection(agent, transport, listening=False)
    try:
        await conn.listen()
    finally:
        await agent.close()
        await conn.close()
        if channel is not None:
            await channel.close()


__all__ = ["serve"]
