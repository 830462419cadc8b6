"""``astro-jupyter mcp`` driven by real MCP clients: the official SDK's (stdio and streamable HTTP),
fastmcp's, and Jupyter's MCP extension loading our ``jupyter_server_mcp.tools`` entry point."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from astro_jupyter.app import AstroApp
from astro_jupyter.config import AstroConfig
from astro_jupyter.agent.executor import ToolLimits
from astro_jupyter.mcp.exposed import EXPOSED
from astro_jupyter.mcp.server import build_server
from astro_jupyter.services.container import Tuning
from tests.fakes.base import FakeHandler, FakeServer

ROOT = Path(__file__).resolve().parents[2]
READ_ONLY = {"search_papers", "query_target", "get_paper_metadata", "rag_search", "get_paper_content", "object_papers",
             "export_bibtex"}
CATALOGS = {"query_catalog", "describe_catalog", "cone_search"}  # keep their VOTable; an unlisted service asks (refused here)
WRITES = {"download_paper", "parse_paper", "save_note"}
NEVER = {"read_file", "file_write", "file_edit", "run_bash", "grep_files", "glob_files", "notebook_read",
         "notebook_edit", "notebook_run", "kernel_run", "kernel_inspect", "subagent", "ask_user"}


def _env(home: Path, sesame_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_", "ASTRO_"))}
    env.update(ASTRO_HOME=str(home), ASTRO_SESAME_URL=sesame_url, PYTHONPATH=str(ROOT), **extra)
    return env


def _stdio(home: Path, sesame_url: str, *flags: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "astro_jupyter.cli", "mcp", *flags],
                                 env=_env(home, sesame_url), cwd=str(ROOT))


async def _sessions(home: Path) -> list[dict[str, Any]]:
    async with AstroApp(AstroConfig(home=str(home))) as app:
        return await app.list_sessions(None)


@pytest.mark.asyncio
async def test_sdk_client_over_stdio_lists_and_calls_and_each_call_is_a_session(tmp_path, sesame_server):
    home = tmp_path / "home"
    async with Client(_stdio(home, sesame_server.url)) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == READ_ONLY | CATALOGS
        target = listed["query_target"]
        assert target.input_schema["required"] == ["name"]
        assert target.annotations.read_only_hint is True and target.annotations.open_world_hint is True
        assert listed["rag_search"].annotations.open_world_hint is False

        result = await client.call_tool("query_target", {"name": "M 31"})
        assert result.is_error is False
        assert "00:42:44.33" in result.content[0].text
        assert result.structured_content["metadata"]["main_id"] == "M 31"
        session_id = result.structured_content["session_id"]

        missing = await client.call_tool("query_target", {"name": "Planet Nine"})
        assert missing.is_error is True and "not found" in missing.content[0].text
        bad = await client.call_tool("query_target", {"rows": 3})  # the model forgot the required name
        assert bad.is_error is True and "name" in bad.content[0].text

        with pytest.raises(MCPError, match="--allow-writes"):
            await client.call_tool("download_paper", {"paper_id": "2101.00001"})
        with pytest.raises(MCPError, match="unknown tool 'run_bash'"):
            await client.call_tool("run_bash", {"command": "id"})

    sessions = {s["id"]: s for s in await _sessions(home)}
    assert len(sessions) == 3  # three calls ran; the refused ones never reached the executor
    record = sessions[session_id]
    assert record["source"] == "mcp" and record["title"].startswith("MCP query_target")
    async with AstroApp(AstroConfig(home=str(home))) as app:
        _, notebook = await app.export_session(None, session_id)
    cells = [c.source for c in notebook.cells if c.cell_type == "code"]
    assert any("%astro query_target" in c and "M 31" in c for c in cells)


@pytest.mark.asyncio
async def test_a_long_output_reaches_the_client_whole_not_as_a_path(tmp_path, sesame_server):
    """The agent gets a stub naming a file under tool-results/ for a long output; an MCP client cannot
    read that file, so it gets the whole text and no path."""
    config = AstroConfig(home=str(tmp_path / "home"), service_urls={"sesame": sesame_server.url})
    tuning = Tuning(tools=ToolLimits(max_output_chars=60))  # the answer is longer: the executor persists it
    async with AstroApp(config, tuning=tuning) as app, Client(build_server(app)) as client:
        result = await client.call_tool("query_target", {"name": "M 31"})
    text = result.content[0].text
    assert "00:42:44.33" in text and "Aliases" in text and len(text) > 60
    assert "persisted" not in text and "tool-results" not in text
    assert "persisted_path" not in result.structured_content["metadata"]


@pytest.mark.asyncio
async def test_writes_only_with_the_flag_and_never_files_notebooks_kernels_or_bash(tmp_path, sesame_server):
    async with Client(_stdio(tmp_path / "home", sesame_server.url, "--allow-writes")) as client:
        names = {t.name: t for t in (await client.list_tools()).tools}
    assert set(names) == READ_ONLY | CATALOGS | WRITES
    assert not set(names) & NEVER
    assert names["query_catalog"].annotations.read_only_hint is False  # it keeps its result
    assert names["query_catalog"].annotations.open_world_hint is True
    assert names["save_note"].annotations.read_only_hint is False
    assert names["save_note"].annotations.destructive_hint is False
    assert set(EXPOSED) == READ_ONLY | CATALOGS | WRITES  # the one list


async def _wait_for_sessions(home: Path, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The session list once it holds ``count`` sessions (polled with a deadline, not a fixed sleep)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(sessions := await _sessions(home)) < count:
        assert loop.time() < deadline, f"{len(sessions)} of {count} sessions stored"
        await asyncio.sleep(0.05)
    return sessions


@pytest.mark.asyncio
async def test_every_answered_call_is_stored_a_write_before_its_answer(tmp_path, sesame_server):
    """A read-only call is answered first and stored meanwhile: it shows in the session list while
    the server runs, and every one is stored by the time the server has stopped. A call that changes
    the library is stored before its answer is sent."""
    home = tmp_path / "home"
    async with Client(_stdio(home, sesame_server.url, "--allow-writes")) as client:
        first = await client.call_tool("query_target", {"name": "M 31"})
        listed = await _wait_for_sessions(home, 1)  # the server is still running
        assert [s["id"] for s in listed] == [first.structured_content["session_id"]]

        note = await client.call_tool("save_note", {"paper_id": "2101.00001", "comment": "check the distance"})
        stored = {s["id"] for s in await _sessions(home)}  # no waiting: stored before it was answered
        assert note.structured_content["session_id"] in stored

        answered = [(await client.call_tool("query_target", {"name": "M 31"})).structured_content["session_id"]
                    for _ in range(15)]
    # the client closed stdin right after the last answer: the server stored every call before exiting
    sessions = {s["id"]: s for s in await _sessions(home)}
    assert set(answered) <= set(sessions) and len(sessions) == 17
    assert all(s["source"] == "mcp" for s in sessions.values())
    async with AstroApp(AstroConfig(home=str(home))) as app:
        audit = await app.services.audit.list(limit=100)
    assert sorted(row["session_id"] for row in audit if row["event"] == "tool_use") == sorted(sessions)


@pytest.mark.asyncio
async def test_sigterm_stops_the_stdio_server_cleanly_with_every_answered_call_stored(tmp_path, sesame_server):
    """A client that stops a server with SIGTERM (without closing stdin first) gets a clean exit, and
    the calls it was answered are in the history. Spoken as raw JSON-RPC lines, the stdio wire format."""
    home = tmp_path / "home"
    proc = subprocess.Popen([sys.executable, "-m", "astro_jupyter.cli", "mcp"], env=_env(home, sesame_server.url),
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def send(message: dict[str, Any]) -> None:
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    async def answer(request_id: int) -> dict[str, Any]:
        while True:
            line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), timeout=60)
            assert line, proc.stderr.read()
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        assert "result" in await answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        ids = []
        for request_id in range(2, 7):
            send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                  "params": {"name": "query_target", "arguments": {"name": "M 31"}}})
            ids.append((await answer(request_id))["result"]["structuredContent"]["session_id"])
        proc.send_signal(signal.SIGTERM)  # stdin stays open
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in proc.stderr.read()
    assert sorted(s["id"] for s in await _sessions(home)) == sorted(ids)


def _start_http(env: dict[str, str], *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "astro_jupyter.cli", "mcp", "--http", *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # "MCP endpoint  http://127.0.0.1:PORT/mcp"
    assert line.startswith("MCP endpoint"), (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line.split()[-1]


async def _only_the_token_gets_in(url: str, token: str, *, wrong: str, target: str) -> Any:
    """No token and a wrong one get 401; the SDK client with ``token`` lists the tools and resolves ``target``."""
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient() as plain:
        refused = await plain.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        mistaken = await plain.post(url, json={}, headers={"Authorization": f"Bearer {wrong}"})
    assert refused.status_code == 401 and mistaken.status_code == 401
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        assert {t.name for t in (await client.list_tools()).tools} == READ_ONLY | CATALOGS
        return await client.call_tool("query_target", {"name": target})


@pytest.mark.asyncio
async def test_sdk_client_over_streamable_http_needs_the_bearer_token(tmp_path, sesame_server):

    env = _env(tmp_path / "home", sesame_server.url, ASTRO_MCP_TOKEN="s3cret-token")
    proc, url = _start_http(env, "127.0.0.1:0")
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        result = await _only_the_token_gets_in(url, "s3cret-token", wrong="nope", target="Sgr A*")
        assert result.is_error is False and "17:45:40.03" in result.content[0].text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # stopped with SIGTERM right after answering: the call was stored before the server exited
    assert [s["id"] for s in await _sessions(tmp_path / "home")] == [result.structured_content["session_id"]]


def test_http_refuses_a_non_loopback_address_without_allow_remote(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "astro_jupyter.cli", "mcp", "--http", "0.0.0.0:0"],
                          env=_env(tmp_path / "home", "http://127.0.0.1:9"), cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "only loopback" in proc.stderr and "--allow-remote" in proc.stderr
    assert not (tmp_path / "home" / "astro.db").exists()  # refused before anything opened


@pytest.mark.asyncio
async def test_fastmcp_client_lists_and_calls_over_stdio(tmp_path, sesame_server):
    from fastmcp import Client as FastClient
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(command=sys.executable, args=["-m", "astro_jupyter.cli", "mcp"],
                               env=_env(tmp_path / "home", sesame_server.url), cwd=str(ROOT))
    async with FastClient(transport) as client:
        assert {t.name for t in await client.list_tools()} == READ_ONLY | CATALOGS
        result = await client.call_tool("query_target", {"name": "NGC 224"})
    assert "M 31" in result.content[0].text and result.structured_content["metadata"]["main_id"] == "M 31"


@pytest.mark.asyncio
async def test_jupyter_server_mcp_loads_our_entry_point_and_calls_a_tool(tmp_path, sesame_server, monkeypatch):
    """The extension's own discovery path: the declared entry point's list of module:function specs,
    each registered with its FastMCP server, listed and called through fastmcp's in-memory client."""
    from fastmcp import Client as FastClient
    from jupyter_server_mcp.extension import MCPExtensionApp
    from jupyter_server_mcp.mcp_server import MCPServer

    monkeypatch.setenv("ASTRO_SESAME_URL", sesame_server.url)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["jupyter_server_mcp.tools"]
    module, _, attr = declared["astro_jupyter"].partition(":")
    import importlib

    specs = getattr(importlib.import_module(module), attr)()
    ext = MCPExtensionApp()
    ext.mcp_server_instance = MCPServer(name="jupyter", port=0)
    ext._register_tools(specs, source="entrypoints")
    assert {t["name"] for t in ext.mcp_server_instance.list_tools()} == READ_ONLY | CATALOGS
    async with FastClient(ext.mcp_server_instance.mcp) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert tools["query_target"].input_schema["required"] == ["name"]
        result = await client.call_tool("query_target", {"name": "M 31"})
        assert "00:42:44.33" in result.content[0].text
        failed = await client.call_tool("query_target", {"name": "Planet Nine"}, raise_on_error=False)
        assert failed.is_error and "not found" in failed.content[0].text
    from astro_jupyter.mcp import jupyter_tools

    await jupyter_tools._app().close()
    jupyter_tools._state.clear()
    assert len(await _sessions(Path(os.environ["ASTRO_HOME"]))) == 2


def test_never_exposes_a_tool_whose_registry_flag_is_not_read_only():
    """A name listed as read-only whose tool is not (a catalog tool added wrongly) is left out."""
    from astro_jupyter.agent.tools import build_default_registry
    from astro_jupyter.agent.tools.registry import ToolRegistry
    from astro_jupyter.mcp.exposed import exposed_tools

    registry = build_default_registry(AstroConfig())
    writer = registry.get("save_note")
    fake = ToolRegistry([t for t in registry.sorted_tools() if t.name != "query_target"])

    class PretendTarget(type(writer)):  # a writing tool under a read-only name
        name = "query_target"

    fake.add(PretendTarget())
    assert "query_target" not in exposed_tools(fake, allow_writes=True)
    assert "query_target" in exposed_tools(registry)


@pytest.mark.asyncio
async def test_http_without_a_token_in_the_environment_prints_one_and_only_it_gets_in(tmp_path, sesame_server):
    """No ASTRO_MCP_TOKEN: the command makes a token and prints it; a client holding the printed token
    gets in, one without it (or with another) gets 401."""

    env = _env(tmp_path / "home", sesame_server.url)
    assert "ASTRO_MCP_TOKEN" not in env
    proc, url = _start_http(env, "127.0.0.1:0")
    try:
        # "Bearer token  <token>" (bounded: a command that prints none would leave readline waiting)
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), timeout=30)
        assert line.startswith("Bearer token"), line
        token = line.split()[-1]
        assert len(token) >= 32
        result = await _only_the_token_gets_in(url, token, wrong=f"{token}x", target="M 31")
        assert result.is_error is False and "00:42:44.33" in result.content[0].text
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class _AnyTap(FakeHandler):
    """A TAP service that records whatever reaches it (nothing should)."""

    def do_GET(self) -> None:  # noqa: N802
        self.record()
        self.send_body(500, b"not expected", "text/plain")

    do_POST = do_GET


@pytest.mark.asyncio
async def test_a_call_the_rules_leave_at_ask_is_refused_at_once_saying_no_one_can_answer(tmp_path):
    """query_catalog against a TAP URL the user has not configured asks; over MCP no one can answer,
    so the call is refused at once (not after the permission timeout), says why and how to allow it,
    and nothing is fetched or stored. The refusal is kept in the history like any call."""
    tuning = Tuning(tools=ToolLimits(permission_timeout_secs=600))  # a question held open would show here
    with FakeServer(_AnyTap) as tap:
        config = AstroConfig(home=str(tmp_path / "home"))
        async with AstroApp(config, tuning=tuning) as app, Client(build_server(app)) as client:
            loop = asyncio.get_running_loop()
            started = loop.time()
            result = await client.call_tool("query_catalog", {"service": f"{tap.url}/tap", "adql": "SELECT 1 AS one"})
            elapsed = loop.time() - started
            kept = await app.services.tap.repo.list()
            session_id = result.structured_content["session_id"]
            audit = await app.services.audit.list(limit=100)
    text = result.content[0].text
    assert result.is_error is True and elapsed < 30
    assert text.startswith("Permission denied for query_catalog")
    assert f"a TAP service you have not configured: {tap.url}/tap" in text
    assert "no one can answer a permission question over MCP" in text
    assert "c.AstroConfig.permission_rules" in text and "%%astro" not in text
    assert tap.requests == [] and kept == []
    [permission] = [row for row in audit if row["event"] == "permission" and row["session_id"] == session_id]
    assert permission["is_error"]
