"""Stdio for ``astro-jupyter acp``: the protocol gets stdout to itself, and bad lines get JSON-RPC errors.

Anything else that writes to stdout (a library's print, a progress bar) would corrupt the
client's stream, so the protocol writes to a duplicate of the original stdout and file
descriptor 1 is pointed at stderr. The SDK's newline-JSON transport logs a traceback and drops
a line that is not JSON, and stops reading on a line that is JSON but not an object; here such
lines are answered the way JSON-RPC 2.0 says (-32700 parse error, -32600 invalid request) and
the connection keeps going.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from acp._transport import NdjsonTransport
from acp.task import MessageSender, TaskSupervisor

LINE_LIMIT = 50 * 1024 * 1024  # the SDK's own stdio buffer limit (images, long prompts)


def _error(code: int, message: str, request_id: Any = None, details: str = "") -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["data"] = {"details": details}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def check_message(message: Any) -> dict[str, Any] | None:
    """None for a JSON-RPC message the connection can route, else the error reply to send."""
    if not isinstance(message, dict):
        return _error(-32600, "Invalid request", details="a JSON-RPC message must be a JSON object (batches are not supported)")
    request_id = message.get("id")
    if request_id is not None and (isinstance(request_id, bool) or not isinstance(request_id, (str, int))):
        return _error(-32600, "Invalid request", details="'id' must be a string or an integer")
    if "method" in message:
        if not isinstance(message["method"], str):
            return _error(-32600, "Invalid request", request_id, "'method' must be a string")
        params = message.get("params")
        if params is not None and not isinstance(params, (dict, list)):
            return _error(-32602, "Invalid params", request_id, "'params' must be an object")
        return None
    if "id" in message and ("result" in message or "error" in message):
        return None  # a response to one of our requests
    return _error(-32600, "Invalid request", request_id, "a request needs a 'method'")


class StrictNdjsonTransport(NdjsonTransport):
    """Newline-delimited JSON-RPC that answers malformed lines instead of logging tracebacks."""

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if not line:
                return None
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError as exc:
                await self.send(_error(-32700, "Parse error", details=str(exc)))
                continue
            problem = check_message(message)
            if problem is None:
                return message
            await self.send(problem)


class StdioChannel:
    """The agent's end of stdio: ``transport`` for ``AgentSideConnection``; ``close`` when done."""

    def __init__(self, transport: StrictNdjsonTransport, tasks: TaskSupervisor) -> None:
        self.transport = transport
        self._tasks = tasks

    @classmethod
    async def open(cls) -> "StdioChannel":
        loop = asyncio.get_running_loop()
        sys.stdout.flush()
        protocol_fd = os.dup(sys.stdout.fileno())
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints land on stderr
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        write_transport, write_protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(protocol_fd, "wb", buffering=0)
        )
        writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
        tasks = TaskSupervisor(source="astro_jupyter.acp.stdio")
        return cls(StrictNdjsonTransport(reader, MessageSender(writer, tasks)), tasks)

    async def close(self) -> None:
        await self.transport.close()
        await self._tasks.shutdown()
