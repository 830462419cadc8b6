"""``astro-jupyter acp``: the agent over the Agent Client Protocol on stdio (jupyter-ai, Zed; docs/acp.md)."""

from __future__ import annotations

import argparse
import importlib.util
import logging

from .registry import EXIT_OK, EXIT_UNAVAILABLE, command, err, make_config


@command("acp", "serve the agent to an ACP client (jupyter-ai, Zed) over stdin/stdout")
async def cmd_acp(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("acp") is None:
        err("`astro-jupyter acp` needs the agent-client-protocol package: pip install 'astro-jupyter[acp]'")
        return EXIT_UNAVAILABLE
    from ..acp import serve
    from ..app import AstroApp

    # stdout carries the protocol; diagnostics go to stderr (the client's log)
    logging.basicConfig(level=logging.WARNING, format="astro-jupyter acp: %(levelname)s %(message)s")
    async with AstroApp(make_config(), source="acp") as app:  # sessions say where they came from
        await serve(app)
    return EXIT_OK
