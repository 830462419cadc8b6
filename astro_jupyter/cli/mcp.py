"""``astro-jupyter mcp``: serve our tools to MCP clients (stdio by default, or ``--http HOST:PORT``)."""

from __future__ import annotations

import argparse
import os
import secrets
import sys

from .registry import EXIT_OK, EXIT_UNAVAILABLE, command, err, make_config


def _mcp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--http", metavar="HOST:PORT",
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0 picks a free one); "
                        "clients send the bearer token printed at start, or the one in $ASTRO_MCP_TOKEN")
    p.add_argument("--allow-writes", action="store_true",
                   help="also offer download_paper, parse_paper and save_note (they add to the library)")
    p.add_argument("--allow-remote", action="store_true",
                   help="with --http, allow a non-loopback address (anyone who can reach it and holds the token)")


@command("mcp", "serve the astronomy tools to MCP clients (Claude Code, Cursor, jupyter-ai, ...)", _mcp_args)
async def cmd_mcp(args: argparse.Namespace) -> int:
    from ..app import AstroApp
    from ..mcp.server import McpServeError, TOKEN_ENV, bind, endpoint_url, parse_address, serve_http, serve_stdio

    sock = None
    if args.http:  # checked before anything opens: a refused address leaves nothing behind
        try:
            sock = bind(*parse_address(args.http), allow_remote=args.allow_remote)
        except McpServeError as exc:
            err(str(exc))
            return EXIT_UNAVAILABLE
    app = AstroApp(make_config(), source="mcp")
    try:
        await app.start()
        if sock is None:
            await serve_stdio(app, allow_writes=args.allow_writes)
            return EXIT_OK
        token = os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(32)
        print(f"MCP endpoint  {endpoint_url(sock)}", flush=True)
        if not os.environ.get(TOKEN_ENV):  # a token the user chose is not echoed
            print(f"Bearer token  {token}", flush=True)
        print("(Authorization: Bearer <token>; Ctrl-C stops)", file=sys.stderr, flush=True)
        await serve_http(app, sock, token, allow_writes=args.allow_writes)
        return EXIT_OK
    finally:
        if sock is not None:
            sock.close()
        await app.close()
