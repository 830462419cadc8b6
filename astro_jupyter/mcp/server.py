"""``astro-jupyter mcp``: our astronomy tools for any MCP client, over the official ``mcp`` SDK.

The server is a thin adapter over ``AstroApp``: ``tools/list`` is the exposed subset of the
registry (``exposed.py``) with its JSON schemas and hints, ``tools/call`` runs the tool through the
same executor as the sidebar (validation, permissions, audit) and stores the call as a session.
Nobody can answer a permission question here, so a call the rules leave at Ask is refused.

When a call is stored: a call that changes something (the library with ``--allow-writes``, or the
tool-results a catalog query keeps) is stored before it is answered, so a change is never answered
without its record. A read-only call is answered first and
stored meanwhile (``PendingStores``): that trip to the database thread was a third of a call's time
on a busy machine (benchmarks/bench_mcp.py). Every pending store is awaited before the server stops
(the client closed stdin, or the HTTP server was stopped); only a process killed outright within
that trip can lose the history entry of a lookup, which changed nothing.

Transports: stdio (what Claude Code, Cursor and jupyter-ai's MCP settings start), or streamable
HTTP on a loopback address with a bearer token (``serve_http``).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import signal
import socket
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from .._version import __version__
from ..agent.permissions import Unattended
from .exposed import EXPOSED, exposed_tools

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..app.core import AstroApp

log = logging.getLogger(__name__)

SOURCE = "mcp"  # what the sessions of these calls record as their origin
MCP_PATH = "/mcp"
TOKEN_ENV = "ASTRO_MCP_TOKEN"
STDIO_LINE_LIMIT = 64 * 1024 * 1024  # one JSON-RPC message from the client, at most
INSTRUCTIONS = (
    "astro-jupyter: literature (ADS + arXiv), object resolution (CDS Sesame) and the user's own paper library "
    "with retrieval over parsed papers. Every call is kept in the user's astro-jupyter history."
)

# The calling agent cannot consent for the user, and nobody else is there: a call the permission rules
# leave at Ask is refused at once (never held until the permission timeout), saying why and how to allow it.
NO_ONE_TO_ASK = Unattended(
    why="no one can answer a permission question over MCP (the calling agent cannot consent for the user)",
    how="To allow it over MCP, add an allow rule for it to c.AstroConfig.permission_rules, or configure what it "
        "asks about (e.g. the TAP service, in c.AstroConfig.tap_services)",
)


class McpServeError(ConfigError):
    """The server cannot be started as asked (a non-loopback address without --allow-remote, a bad address)."""


def tool_listing(app: "AstroApp", *, allow_writes: bool) -> list[types.Tool]:
    """The ``tools/list`` answer: schema, description and MCP hints of each exposed tool."""
    listed = []
    for name, tool in exposed_tools(app.tool_registry(), allow_writes=allow_writes).items():
        exposure = EXPOSED[name]
        listed.append(types.Tool(
            name=name,
            description=tool.description,
            input_schema=dict(tool.parameters),
            annotations=types.ToolAnnotations(
                read_only_hint=exposure.read_only,
                destructive_hint=False,  # our writes only add to the library
                idempotent_hint=exposure.read_only,
                open_world_hint=exposure.open_world,
            ),
        ))
    return listed


def _structured(metadata: dict[str, Any]) -> dict[str, Any]:
    """The tool's metadata as plain JSON (paths and other objects as text)."""
    return json.loads(json.dumps(metadata, ensure_ascii=False, default=str))


async def _whole_output(app: "AstroApp", content: str, metadata: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The full text of an output the executor persisted (the model got a stub naming a file under
    tool-results/): an outside client cannot read that file, so it gets the text itself, and no path."""
    path = metadata.pop("persisted_path", None)
    if not path:
        return content, metadata
    root = app.config.tool_results_dir.resolve()
    try:
        resolved = Path(path).resolve()
        if not resolved.is_relative_to(root):
            return content, metadata
        return await asyncio.to_thread(resolved.read_text, encoding="utf-8"), metadata
    except (OSError, ValueError):
        return content, metadata


class PendingStores:
    """Session stores of read-only calls already answered; ``drain`` before the server stops."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, store: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(store)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: "asyncio.Task[None]") -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("an answered MCP call could not be stored as a session: %s", task.exception())

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.wait(set(self._tasks))


def build_server(app: "AstroApp", *, allow_writes: bool = False, pending: PendingStores | None = None) -> Server[Any]:
    """An MCP server bound to ``app`` (started by the caller). With ``pending``, read-only calls are
    stored after their answer and the caller drains it; without, every call is stored first."""
    listing = tool_listing(app, allow_writes=allow_writes)
    names = {t.name for t in listing}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in names:
            hint = " (it changes the library: start the server with --allow-writes)" \
                if params.name in EXPOSED and EXPOSED[params.name].writes else ""
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}{hint}; tools: {', '.join(sorted(names))}")
        arguments = params.arguments if params.arguments is not None else {}
        run, session_id, store = await app.run_tool_for_session(params.name, arguments, source=SOURCE,
                                                                 title_prefix="MCP", unattended=NO_ONE_TO_ASK)
        if pending is None or not EXPOSED[params.name].read_only:
            await store
        else:
            pending.add(store)
        text, metadata = await _whole_output(app, run.content, dict(run.metadata))
        return types.CallToolResult(
            content=[types.TextContent(text=text)],
            structured_content={"content": text, "metadata": _structured(metadata), "session_id": session_id},
            is_error=run.is_error,
        )

    return Server("astro-jupyter", version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(app: "AstroApp", *, allow_writes: bool = False) -> None:
    """Serve one client over this process's stdin/stdout until it closes them.

    The SDK reads stdin and writes stdout through a worker thread per line; on a busy machine each
    hop waits for a core, which was most of a call's time (20 ms p50 under load, benchmarks/bench_mcp.py).
    When both ends are pipes (how every MCP client starts a server) they are read and written on the
    event loop instead; anything else (a file, a terminal that cannot be polled) keeps the SDK's way."""
    pending = PendingStores()
    try:
        await _until_sigterm(run_stdio(build_server(app, allow_writes=allow_writes, pending=pending)))
    finally:
        await pending.drain()


async def _until_sigterm(serving: Coroutine[Any, Any, None]) -> None:
    """Run ``serving``; SIGTERM (a client's second way to stop a server, after closing stdin) stops it
    as closing stdin would, so what was answered is stored and the exit is clean, not a kill."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    try:
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
        await serving
        return
    task, stopper = asyncio.ensure_future(serving), asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        else:
            task.result()
    finally:
        stopper.cancel()
        task.cancel()
        loop.remove_signal_handler(signal.SIGTERM)


async def run_stdio(server: Server[Any]) -> None:
    """Serve ``server`` over stdin/stdout (the transport of ``serve_stdio``; the benchmark's floor
    serves a do-nothing tool through it too)."""
    from mcp.server.stdio import stdio_server

    pipes = await _loop_pipes()
    try:
        streams = stdio_server(*pipes) if pipes else stdio_server()
        async with streams as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        if pipes:
            pipes[1].close()


class _LineReader:
    """Text lines of a pipe read on the event loop (what the SDK's stdio server iterates)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> "_LineReader":
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _LineWriter:
    """Text written to a pipe on the event loop (``write`` + ``flush``, as the SDK calls them)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()

    def close(self) -> None:
        self._writer.close()


async def _loop_pipes() -> tuple[Any, Any] | None:
    """stdin/stdout as event-loop pipes, with fd 0 on /dev/null and fd 1 on stderr meanwhile (a stray
    print must not corrupt the wire); None when they are not pipes."""
    try:
        if not all(stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode) for fd in (0, 1)):
            return None
    except OSError:
        return None
    loop = asyncio.get_running_loop()
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    reader = asyncio.StreamReader(limit=STDIO_LINE_LIMIT, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", 0))
    return _LineReader(reader), _LineWriter(asyncio.StreamWriter(transport, protocol, None, loop))


# -- streamable HTTP --------------------------------------------------------------------------

def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``PORT`` (then 127.0.0.1); ``[::1]:PORT`` for IPv6."""
    host, sep, port = text.strip().rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text.strip()
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise McpServeError(f"--http wants HOST:PORT (e.g. 127.0.0.1:8765, or port 0 for a free one), not {text!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bearer_guard(app: Callable[..., Awaitable[None]], token: str) -> Callable[..., Awaitable[None]]:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>`` (constant-time check)."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                body = b'{"error": "unauthorized", "message": "a bearer token is required (see astro-jupyter mcp --http)"}'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="astro-jupyter"'),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def bind(host: str, port: int, *, allow_remote: bool = False) -> socket.socket:
    """The listening socket (bound before serving, so port 0 is known and printed)."""
    if not is_loopback(host) and not allow_remote:
        raise McpServeError(
            f"refusing to listen on {host}: only loopback addresses (127.0.0.1, ::1, localhost) unless --allow-remote"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise McpServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve_http(app: "AstroApp", sock: socket.socket, token: str, *, allow_writes: bool = False) -> None:
    """Serve streamable HTTP at ``/mcp`` on ``sock`` until cancelled."""
    import uvicorn

    host = sock.getsockname()[0]
    pending = PendingStores()
    server = build_server(app, allow_writes=allow_writes, pending=pending)
    asgi = server.streamable_http_app(streamable_http_path=MCP_PATH, host="127.0.0.1" if is_loopback(host) else host)
    config = uvicorn.Config(bearer_guard(asgi, token), log_level="warning", lifespan="on")
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        await pending.drain()


def endpoint_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}{MCP_PATH}"
