"""MCP servers others publish, used as the agent's tools (the client side, over the official ``mcp`` SDK).

Where servers come from: ``c.AstroConfig.mcp_servers`` and the project's ``.jupyter/mcp_settings.json``
(jupyter-ai's file; both the ``{"mcp_servers": [{"name": ...}]}`` list and the common
``{"mcpServers": {name: {...}}}`` map are read). A server is a command (+ args, env, cwd) spoken to
over stdio, or a streamable-HTTP URL (+ headers).

Lifecycle: nothing starts until a run (or ``doctor``, or a direct call) needs a server's tool list;
each server then runs in one task that owns the SDK client (its anyio scopes must open and close in
one task) until ``McpManager.close()``, which the service container calls when its owner (the agent
host, the kernel, the CLI command) stops. A server that dies is started again on the next call, at
most ``MAX_RESTARTS`` times in a row without a call that succeeds.

Everything a server says is untrusted, like a paper's text: descriptions and results are stripped of
control characters and capped here, and the agent asks before each call (``agent/tools/mcp.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import itertools
import json
import logging
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ServiceError

if TYPE_CHECKING:
    from ..config import AstroConfig
    from ..services.container import ServiceContainer

log = logging.getLogger(__name__)

SETTINGS_FILE = Path(".jupyter") / "mcp_settings.json"  # jupyter-ai's, under the project root
START_TIMEOUT_SECS = 15.0  # start + handshake + first tools/list (a run waits for it once)
CALL_TIMEOUT_SECS = 120.0  # one tools/call, unless the server's entry sets "timeout"
MAX_RESTARTS = 3  # starts in a row without a successful call before the server is left failed
MAX_DESCRIPTION_CHARS = 1000  # of a tool's description, shown to the model
MAX_RESULT_CHARS = 1_000_000  # of one call's text; beyond it cut (the executor persists what is over its own cap)
NAME_LIMIT = 64  # what model APIs accept as a function name
_NAME_OK = re.compile(r"[^A-Za-z0-9_-]+")
_SERVER_NAME = re.compile(r"^[A-Za-z0-9-]{1,40}$|^(?=.{1,40}$)[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)+$")  # no "__": names split there


@functools.cache
def _unsafe_pattern() -> "re.Pattern[str]":
    """One character class of every control (but newline and tab), format, surrogate and private-use code point
    (built once, on first use: the planes that hold such characters are scanned, 15-16 are all private use)."""
    ranges: list[tuple[int, int]] = []
    for cp in itertools.chain(range(0x30000), range(0xE0000, 0xE1000)):
        if chr(cp) in "\n\t" or unicodedata.category(chr(cp)) not in ("Cc", "Cf", "Cs", "Co"):
            continue
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    ranges.append((0xF0000, sys.maxunicode))
    return re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]")


class McpConfigError(ConfigError, ValueError):
    """A server entry that cannot be used (told by ``doctor``; the others still work)."""


@dataclass(frozen=True)
class ServerSpec:
    """One configured server: a command spoken to over stdio, or a streamable-HTTP URL."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str = ""
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = CALL_TIMEOUT_SECS
    origin: str = "config"  # "config" or the settings file it came from

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def describe(self) -> str:
        """What ``doctor`` shows: the URL, or the command line (env values never shown)."""
        return self.url if self.url else " ".join((self.command, *self.args))


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise McpConfigError(f"{what} must be a list of strings")
    return tuple(value)


def _string_map(value: Any, what: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise McpConfigError(f"{what} must map names to strings")
    return tuple(sorted(value.items()))


def parse_spec(name: str, entry: Any, origin: str = "config") -> ServerSpec:
    """One server entry, checked (McpConfigError says what is wrong with it)."""
    if not isinstance(name, str) or not _SERVER_NAME.match(name):
        raise McpConfigError(f"server name {name!r}: use letters, digits, '-' and single '_' inside (at most 40)")
    if not isinstance(entry, dict):
        raise McpConfigError(f"server {name!r}: the entry must be an object")
    command, url = entry.get("command") or "", entry.get("url") or ""
    if not isinstance(command, str) or not isinstance(url, str):
        raise McpConfigError(f"server {name!r}: 'command' and 'url' must be strings")
    if bool(command) == bool(url):
        raise McpConfigError(f"server {name!r}: give either 'command' (stdio) or 'url' (streamable HTTP)")
    if url and not url.startswith(("http://", "https://")):
        raise McpConfigError(f"server {name!r}: 'url' must be http:// or https://")
    timeout = entry.get("timeout", CALL_TIMEOUT_SECS)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise McpConfigError(f"server {name!r}: 'timeout' must be seconds between 0 and 3600")
    cwd = entry.get("cwd") or ""
    if not isinstance(cwd, str):
        raise McpConfigError(f"server {name!r}: 'cwd' must be a string")
    return ServerSpec(
        name=name, command=command, args=_strings(entry.get("args"), f"server {name!r}: 'args'"),
        env=_string_map(entry.get("env"), f"server {name!r}: 'env'"), cwd=cwd, url=url,
        headers=_string_map(entry.get("headers"), f"server {name!r}: 'headers'"), timeout=float(timeout), origin=origin,
    )


def _settings_entries(path: Path) -> list[tuple[str, Any]]:
    """The (name, entry) pairs of a settings file in either shape; McpConfigError when unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise McpConfigError(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise McpConfigError(f"{path}: expected a JSON object")
    entries: list[tuple[str, Any]] = []
    listed = data.get("mcp_servers")
    if isinstance(listed, list):
        entries += [(e.get("name") if isinstance(e, dict) else None, e) for e in listed]  # type: ignore[misc]
    mapped = data.get("mcpServers")
    if isinstance(mapped, dict):
        entries += list(mapped.items())
    if listed is None and mapped is None:
        raise McpConfigError(f"{path}: no 'mcp_servers' list or 'mcpServers' object")
    return entries


def load_specs(config: "AstroConfig") -> tuple[list[ServerSpec], list[str]]:
    """The configured servers (the trait first; a settings-file entry of the same name is ignored)
    and the problems found (one line each, for ``doctor`` and the log)."""
    specs: dict[str, ServerSpec] = {}
    problems: list[str] = []
    entries: list[tuple[Any, Any, str]] = [(n, e, "config") for n, e in (config.mcp_servers or {}).items()]
    path = Path(config.project_root).expanduser() / SETTINGS_FILE
    if path.is_file():
        try:
            entries += [(n, e, str(path)) for n, e in _settings_entries(path)]
        except McpConfigError as exc:
            problems.append(str(exc))
    for name, entry, origin in entries:
        try:
            spec = parse_spec(name, entry, origin)
        except McpConfigError as exc:
            problems.append(str(exc) if origin == "config" else f"{origin}: {exc}")
            continue
        if spec.name in specs:
            if origin != "config":
                continue  # the trait wins over the file
            problems.append(f"server {spec.name!r} is configured twice")
            continue
        specs[spec.name] = spec
    return list(specs.values()), problems


# -- untrusted text ------------------------------------------------------------------------------

def clean_untrusted(text: str, limit: int) -> str:
    """Text from a server as it may reach a prompt: no control, format (bidi overrides, zero-width),
    surrogate or private-use characters (newlines and tabs kept), at most ``limit`` characters."""
    if not isinstance(text, str):
        text = str(text)
    total = len(text)
    cleaned = _unsafe_pattern().sub("", text[:limit])  # cut first: cleaning only shortens, and 10 MB stays cheap
    if total > limit:
        cleaned += f"\n[... cut: the server sent {total} characters, the first {limit} kept]"
    return cleaned


def agent_tool_name(server: str, tool: str, taken: set[str]) -> str:
    """``mcp__server__tool``, valid as a model function name and not in ``taken``."""
    base = f"mcp__{server}__{_NAME_OK.sub('_', tool) or 'tool'}"
    name = base
    if len(name) > NAME_LIMIT or name in taken:
        digest = hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()[:8]
        name = f"{base[:NAME_LIMIT - 9]}_{digest}"
    return name


def schema_problem(schema: Any) -> str | None:
    """Why a tool's input schema cannot be used (None when it is an object JSON Schema)."""
    if not isinstance(schema, dict):
        return "its input schema is not an object"
    if schema.get("type", "object") != "object":
        return f"its input schema's root type is {schema.get('type')!r}, not 'object'"
    try:
        import jsonschema

        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return f"its input schema is not valid JSON Schema ({exc.message})"
    except Exception as exc:  # noqa: BLE001 - e.g. an unresolvable $schema: the schema is not usable
        return f"its input schema cannot be read ({type(exc).__name__}: {exc})"
    if len(json.dumps(schema)) > 100_000:
        return "its input schema is larger than 100 kB"
    return None


def _clean_schema(value: Any) -> Any:
    """A schema with every string (descriptions, titles, enum values) cleaned like a description:
    the model reads them too."""
    if isinstance(value, dict):
        return {clean_untrusted(str(k), MAX_DESCRIPTION_CHARS): _clean_schema(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_schema(v) for v in value]
    return clean_untrusted(value, MAX_DESCRIPTION_CHARS) if isinstance(value, str) else value


@dataclass
class RemoteTool:
    """A tool a server listed, as the agent will see it."""

    server: str
    remote_name: str
    name: str  # mcp__server__tool
    description: str
    parameters: dict[str, Any]
    read_only_claim: bool  # the server's readOnlyHint: shown, never trusted


@dataclass
class CallOutcome:
    text: str
    is_error: bool
    metadata: dict[str, Any] = field(default_factory=dict)


def result_text(result: Any) -> tuple[str, dict[str, Any]]:
    """A ``CallToolResult`` as text for the model (non-text blocks named, not inlined) and metadata."""
    parts: list[str] = []
    kinds: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "?")
        kinds.append(kind)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            res = block.resource
            parts.append(getattr(res, "text", None) or f"[binary resource {res.uri} omitted]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {block.uri}]")
        else:
            parts.append(f"[{kind} content ({getattr(block, 'mime_type', '') or 'unknown type'}) omitted]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    return "\n".join(parts), {"content_types": kinds}


# -- one server ------------------------------------------------------------------------------------

class ServerUnavailable(ServiceError):
    """A server could not be started, listed or reached (the message says why, for the model and doctor)."""


class McpServerConnection:
    """One configured server: started on first need, restarted after it dies, closed with the manager."""

    def __init__(self, spec: ServerSpec, log_dir: Path) -> None:
        self.spec = spec
        self.state = "not started"  # not started | starting | ready | failed: ... | stopped
        self.tools: list[RemoteTool] | None = None
        self.skipped: dict[str, str] = {}  # tools left out → why
        self.starts = 0
        self._failures_in_row = 0
        self._client: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock = asyncio.Lock()
        self._log_path = log_dir / f"{spec.name}.stderr.log"

    # -- lifecycle ---------------------------------------------------------------------------------
    async def _transport(self, stack: contextlib.AsyncExitStack, errlog: Any) -> Any:
        """The SDK transport; an HTTP client of ours is closed with ``stack`` (the SDK leaves a given one open).
        A stdio server gets the SDK's minimal environment (PATH, HOME, ...) plus its entry's ``env``: none of ours."""
        if self.spec.url:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            http = await stack.enter_async_context(create_mcp_http_client(headers=dict(self.spec.headers)))
            return streamable_http_client(self.spec.url, http_client=http)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=self.spec.command, args=list(self.spec.args),
                                       env=dict(self.spec.env) or None, cwd=self.spec.cwd or None)
        return stdio_client(params, errlog=errlog)

    async def _own(self, ready: asyncio.Future[None]) -> None:
        """The task that holds the SDK client open until told to stop (or the server dies)."""
        from mcp import Client

        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        assert self._stop is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                errlog = stack.enter_context(open(self._log_path, "w", encoding="utf-8", errors="replace"))
                transport = await self._transport(stack, errlog)
                async with Client(transport, read_timeout_seconds=self.spec.timeout) as client:
                    self._client = client
                    if not ready.done():
                        ready.set_result(None)
                    await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - whatever ended it, the waiter must hear it
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ServerUnavailable("start was cancelled"))
            if not isinstance(exc, (Exception, asyncio.CancelledError)):
                raise
        finally:
            self._client = None
            if self.state == "ready":
                self.state = "not started"  # it went away: the next call starts it again

    async def ensure(self) -> Any:
        """The live SDK client, starting the server (and listing its tools) when needed."""
        async with self._lock:
            if self._client is not None and self._owner is not None and not self._owner.done():
                return self._client
            if self._failures_in_row >= MAX_RESTARTS:
                raise ServerUnavailable(f"MCP server {self.spec.name!r} is not available ({self.state})")
            await self._shutdown()
            self.state, self.starts = "starting", self.starts + 1
            self._stop = asyncio.Event()
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._owner = asyncio.create_task(self._own(ready), name=f"mcp-server-{self.spec.name}")
            try:
                await asyncio.wait_for(asyncio.shield(ready), START_TIMEOUT_SECS)
                if self.tools is None:
                    await asyncio.wait_for(self._list(), START_TIMEOUT_SECS)
            except BaseException as exc:
                self._failures_in_row += 1
                reason = _reason(exc, f"did not start within {START_TIMEOUT_SECS:g} s")
                self.state = f"failed: {reason}{self._stderr_tail()}"
                await self._shutdown()
                if isinstance(exc, asyncio.CancelledError):
                    raise
                raise ServerUnavailable(f"MCP server {self.spec.name!r} could not be started: {reason}") from exc
            self.state = "ready"
            return self._client

    async def _list(self) -> None:
        listed = await self._client.list_tools()
        tools: list[RemoteTool] = []
        skipped: dict[str, str] = {}
        taken: set[str] = set()
        for tool in listed.tools:
            problem = schema_problem(tool.input_schema)
            if problem:
                skipped[tool.name] = problem
                continue
            name = agent_tool_name(self.spec.name, tool.name, taken)
            taken.add(name)
            hints = tool.annotations
            tools.append(RemoteTool(
                server=self.spec.name, remote_name=tool.name, name=name,
                description=clean_untrusted(tool.description or "", MAX_DESCRIPTION_CHARS),
                parameters=_clean_schema(tool.input_schema),
                read_only_claim=bool(hints is not None and hints.read_only_hint),
            ))
        self.tools, self.skipped = tools, skipped

    def _stderr_tail(self) -> str:
        try:
            tail = self._log_path.read_text(encoding="utf-8", errors="replace")[-400:].strip()
        except OSError:
            return ""
        return f" (its stderr ends: {clean_untrusted(tail, 400)})" if tail else ""

    async def _shutdown(self) -> None:
        owner, self._owner = self._owner, None
        if owner is None:
            return
        if self._stop is not None:
            self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(owner), 5)
        except BaseException:  # noqa: BLE001 - a server that will not close is cancelled
            owner.cancel()
            with contextlib.suppress(BaseException):
                await owner

    async def close(self) -> None:
        async with self._lock:
            await self._shutdown()
            self.state = "stopped"

    # -- calls -------------------------------------------------------------------------------------------
    async def call(self, remote_name: str, arguments: dict[str, Any]) -> CallOutcome:
        client = await self.ensure()
        try:
            result = await asyncio.wait_for(client.call_tool(remote_name, arguments), self.spec.timeout)
        except asyncio.TimeoutError:
            return CallOutcome(f"the MCP server {self.spec.name!r} did not answer within {self.spec.timeout:g} s", True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a dead server or a protocol error is the call's result
            if _connection_lost(exc) or self._owner is None or self._owner.done():
                self._failures_in_row += 1
                tail = self._stderr_tail()
                self.state = f"stopped during a call{tail}"
                async with self._lock:
                    await self._shutdown()  # the next call starts it again
                return CallOutcome(
                    f"the MCP server {self.spec.name!r} stopped during the call ({_reason(exc, 'connection closed')})"
                    f"{tail}; it is started again on the next call", True)
            return CallOutcome(f"the MCP server {self.spec.name!r} refused the call: {_reason(exc, 'error')}", True)
        self._failures_in_row = 0
        text, metadata = result_text(result)
        return CallOutcome(clean_untrusted(text, MAX_RESULT_CHARS), bool(result.is_error), metadata)


def _connection_lost(exc: BaseException) -> bool:
    """The server's end is gone (the process died, the stream closed), not a refusal of one call."""
    import anyio
    from mcp_types import CONNECTION_CLOSED

    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    return isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError))


def _reason(exc: BaseException, fallback: str) -> str:
    grouped = getattr(exc, "exceptions", None)  # an exception group: anyio task groups wrap the cause
    if isinstance(grouped, (list, tuple)) and grouped:
        return "; ".join(_reason(e, fallback) for e in grouped)
    if isinstance(exc, (asyncio.TimeoutError, asyncio.CancelledError)):
        return fallback
    text = str(exc).strip() or type(exc).__name__
    return clean_untrusted(f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text, 300)


# -- all servers --------------------------------------------------------------------------------------

class McpManager:
    """The configured servers of one service container (one per process that runs tools)."""

    def __init__(self, config: "AstroConfig") -> None:
        self.specs, self.problems = load_specs(config)
        for problem in self.problems:
            log.warning("MCP configuration: %s", problem)
        log_dir = config.home_path / "mcp"
        self.servers = {spec.name: McpServerConnection(spec, log_dir) for spec in self.specs}

    @classmethod
    def of(cls, services: "ServiceContainer") -> "McpManager":
        return services.attachment(cls, lambda s: cls(s.config))

    async def listings(self) -> list[RemoteTool]:
        """Every usable tool of every server, starting those not yet listed (concurrently); a server
        that fails is left out, its state says why."""
        async def one(conn: McpServerConnection) -> list[RemoteTool]:
            if conn.tools is None:
                try:
                    await conn.ensure()
                except ServerUnavailable as exc:
                    log.warning("%s", exc)
                    return []
            return list(conn.tools or [])

        found = await asyncio.gather(*(one(c) for c in self.servers.values()))
        return [tool for tools in found for tool in tools]

    async def call(self, server: str, remote_name: str, arguments: dict[str, Any]) -> CallOutcome:
        conn = self.servers.get(server)
        if conn is None:
            return CallOutcome(f"no MCP server {server!r} is configured", True)
        try:
            return await conn.call(remote_name, arguments)
        except ServerUnavailable as exc:
            return CallOutcome(str(exc), True)

    def report(self) -> dict[str, Any]:
        """What ``doctor`` prints: each server, where it came from, its state and tools."""
        return {
            "problems": list(self.problems),
            "servers": [
                {"name": c.spec.name, "transport": c.spec.transport, "target": c.spec.describe(), "origin": c.spec.origin,
                 "state": c.state, "tools": [t.name for t in c.tools or []], "skipped": dict(c.skipped)}
                for c in self.servers.values()
            ],
        }

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.servers.values()), return_exceptions=True)
