"""Outside MCP servers as agent tools: real servers from PyPI started as a user would, and a hostile one
of our own (tests/fakes/mcp_hostile_server.py) for what a server may do wrong or on purpose."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from astro_jupyter.app import AstroApp
from astro_jupyter.config import AstroConfig
from astro_jupyter.events import PermissionRequest, ToolCall, ToolResult
from astro_jupyter.mcp.client import MAX_DESCRIPTION_CHARS, load_specs
from tests.agent.runtime_helpers import FAST
from tests.fakes.openai_server import Turn

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HOSTILE = ["-m", "tests.fakes.mcp_hostile_server"]


class Answers:
    """An answerer that records the questions and gives scripted replies."""

    def __init__(self, reply: str = "allow") -> None:
        self.reply, self.asked = reply, []

    async def answer(self, question: Any) -> str:
        self.asked.append(question)
        return self.reply


def hostile(tmp_path: Path, *extra: str, timeout: float = 60) -> dict[str, Any]:
    return {"command": sys.executable, "args": [*HOSTILE, "--mark", str(tmp_path), *extra], "cwd": str(ROOT),
            "timeout": timeout}


def config(tmp_path: Path, servers: dict[str, Any], **kw: Any) -> AstroConfig:
    return AstroConfig(home=str(tmp_path / "home"), project_root=str(tmp_path), mcp_servers=servers, **kw)


def calls_reached(tmp_path: Path) -> list[str]:
    marks = tmp_path / "calls.txt"
    return marks.read_text().split() if marks.exists() else []


@pytest.mark.asyncio
async def test_a_real_server_from_pypi_asks_first_and_answers(tmp_path):
    """mcp-server-time, started by its console script: nothing runs until a call needs it, the call asks,
    a refusal never reaches the server, an allow rule for the server lets its tools through."""
    servers = {"time": {"command": str(BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}}
    async with AstroApp(config(tmp_path, servers)) as app:
        refused = await app.run_tool("mcp__time__get_current_time", {"timezone": "UTC"})
        assert refused.is_error and "Permission" in refused.content
        asked = Answers("allow")
        allowed = await app.run_tool("mcp__time__get_current_time", {"timezone": "UTC"}, answerer=asked)
        [question] = asked.asked
        assert isinstance(question, PermissionRequest) and question.name == "mcp__time__get_current_time"
        assert "'time'" in question.message
        assert not allowed.is_error and json.loads(allowed.content)["timezone"] == "UTC"
        assert allowed.metadata["mcp_server"] == "time" and allowed.metadata["mcp_tool"] == "get_current_time"
    rules = [{"action": "allow", "tool": "mcp__time__*"}]
    async with AstroApp(config(tmp_path, servers, permission_rules=rules)) as app:
        converted = await app.run_tool("mcp__time__convert_time",
                                       {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
        assert not converted.is_error and "Asia/Tokyo" in converted.content


@pytest.mark.asyncio
async def test_mcp_server_fetch_reads_a_loopback_page(tmp_path):
    from tests.fakes.file_server import Route, file_server

    pages = file_server().start()
    pages.state["routes"] = {"/note.html": Route(b"<html><body><h1>Vega</h1><p>alpha Lyrae, A0V</p></body></html>",
                                                 "text/html")}
    try:
        servers = {"fetch": {"command": str(BIN / "mcp-server-fetch"), "args": ["--ignore-robots-txt", "--allow-private-ips"]}}
        rules = [{"action": "allow", "tool": "mcp__fetch__fetch"}]
        async with AstroApp(config(tmp_path, servers, permission_rules=rules)) as app:
            page = await app.run_tool("mcp__fetch__fetch", {"url": f"{pages.url}/note.html"})
        assert not page.is_error and "alpha Lyrae" in page.content, page.content
    finally:
        pages.stop()


@pytest.mark.asyncio
async def test_jupyter_ai_settings_file_in_both_shapes(tmp_path):
    settings = tmp_path / ".jupyter" / "mcp_settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({
        "mcp_servers": [{"name": "clock", "command": str(BIN / "mcp-server-time")},
                        {"name": "remote", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer t"}},
                        {"name": "broken", "url": "ftp://nowhere"},
                        {"name": "two__parts", "command": "x"}],  # "__" would make mcp__two__parts__tool ambiguous
        "mcpServers": {"time": {"command": "ignored-because-the-trait-wins"}},
    }))
    specs, problems = load_specs(config(tmp_path, {"time": {"command": str(BIN / "mcp-server-time")}}))
    by_name = {s.name: s for s in specs}
    assert set(by_name) == {"time", "clock", "remote"}
    assert by_name["time"].origin == "config" and by_name["time"].command.endswith("mcp-server-time")
    assert by_name["remote"].transport == "http" and dict(by_name["remote"].headers) == {"Authorization": "Bearer t"}
    assert len(problems) == 2 and "broken" in problems[0] and "http" in problems[0] and "two__parts" in problems[1]


@pytest.mark.asyncio
async def test_doctor_lists_servers_state_and_tools(tmp_path):
    servers = {"time": {"command": str(BIN / "mcp-server-time")},
               "hostile": hostile(tmp_path),
               "dead": {"command": sys.executable, "args": [*HOSTILE, "--mode", "exit"], "cwd": str(ROOT)},
               "missing": {"command": str(tmp_path / "no-such-server")},
               "typo": {"command": "x", "url": "http://127.0.0.1:9/mcp"}}
    async with AstroApp(config(tmp_path, servers)) as app:
        report = (await app.diagnose())["mcp"]
    by_name = {s["name"]: s for s in report["servers"]}
    assert by_name["time"]["state"] == "ready" and "mcp__time__get_current_time" in by_name["time"]["tools"]
    assert by_name["dead"]["state"].startswith("failed") and "missing API key" in by_name["dead"]["state"]
    assert by_name["missing"]["state"].startswith("failed") and "No such file" in by_name["missing"]["state"]
    assert "bad_schema" in by_name["hostile"]["skipped"] and "JSON Schema" in by_name["hostile"]["skipped"]["bad_schema"]
    assert any("typo" in p and "either" in p for p in report["problems"])


@pytest.mark.asyncio
async def test_started_lazily_and_stopped_with_the_owner(tmp_path):
    pidfile = tmp_path / "hostile.pid"
    servers = {"hostile": hostile(tmp_path, "--pidfile", str(pidfile))}
    rules = [{"action": "allow", "tool": "mcp__hostile__echo"}]
    async with AstroApp(config(tmp_path, servers, permission_rules=rules)) as app:
        await app.run_tool("query_target", {"name": "x"})  # our own tools start nothing
        assert not pidfile.exists()
        echoed = await app.run_tool("mcp__hostile__echo", {"text": "hi"})
        assert echoed.content == "echo: hi" and pidfile.exists()
        pid = int(pidfile.read_text())
        os.kill(pid, 0)  # alive while the app is
    deadline = asyncio.get_running_loop().time() + 10
    while True:  # gone once the app closed (reaped by the SDK's transport)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        assert asyncio.get_running_loop().time() < deadline, "the MCP server outlived its owner"
        await asyncio.sleep(0.05)


@pytest.mark.asyncio
async def test_hostile_server(tmp_path):
    """10 MB, a hang, a crash mid-call (then a restart), a read-only liar, an injected description,
    a name of ours, a schema that is not JSON Schema, a stderr flood, control characters."""
    servers = {"hostile": hostile(tmp_path), "stuck": hostile(tmp_path, timeout=2)}
    always: list[dict[str, str]] = [{"action": "allow", "tool": f"mcp__hostile__{t}"}
                                    for t in ("huge", "crash", "echo", "flood", "controls")]
    always.append({"action": "allow", "tool": "mcp__stuck__hang"})
    async with AstroApp(config(tmp_path, servers, permission_rules=always)) as app:
        registry = app.tool_registry()
        from astro_jupyter.agent.tools.mcp import install

        await install(registry, app.services)

        # our name wins: search_papers is still ours, theirs carries the prefix
        assert type(registry.get("search_papers")).__module__ == "astro_jupyter.agent.tools.astro.search"
        assert registry.get("mcp__hostile__search_papers") is not None
        assert registry.get("mcp__hostile__bad_schema") is None
        assert all(registry.get(n).defer_loading for n in registry.names() if n.startswith("mcp__"))

        injected = registry.get("mcp__hostile__injector")
        assert "\x1b" not in injected.description and "\u202e" not in injected.description
        assert len(injected.description) < MAX_DESCRIPTION_CHARS + 200
        assert injected.description.startswith("[MCP server 'hostile'")
        assert len(injected.classifier_summary()) <= 100
        said = injected.parameters["properties"]["text"]["description"]  # the schema is read by the model too
        assert "\x1b" not in said and "\u202e" not in said and len(said) < MAX_DESCRIPTION_CHARS + 200

        huge = await app.run_tool("mcp__hostile__huge", {})
        assert not huge.is_error and Path(huge.metadata["persisted_path"]).is_file()
        assert len(huge.content) < 10_000 and huge.metadata["original_chars"] <= 1_100_000

        hung = await app.run_tool("mcp__stuck__hang", {})
        assert hung.is_error and "did not answer within 2 s" in hung.content

        crashed = await app.run_tool("mcp__hostile__crash", {})
        assert crashed.is_error and "stopped during the call" in crashed.content and "crashing now" in crashed.content
        again = await app.run_tool("mcp__hostile__echo", {"text": "back"})
        assert not again.is_error and again.content == "echo: back"  # started again

        flooded = await app.run_tool("mcp__hostile__flood", {})
        assert not flooded.is_error and flooded.content == "flooded"

        controls = await app.run_tool("mcp__hostile__controls", {})
        assert controls.content == "clean[2J text with  controls\nsecond line"

        # readOnlyHint is a claim: auto mode still asks, and with no one to answer the call never happens
        target = tmp_path / "written.txt"
        liar = await app.run_tool("mcp__hostile__liar", {"path": str(target)})
        assert liar.is_error and "Permission" in liar.content and not target.exists()
        asked = Answers("deny")
        await app.run_tool("mcp__hostile__liar", {"path": str(target)}, answerer=asked)
        assert len(asked.asked) == 1 and not target.exists()
    assert "liar" not in calls_reached(tmp_path)


@pytest.mark.asyncio
async def test_an_agent_finds_the_tool_with_load_tool_and_is_asked(tmp_path, openai_server):
    """A run: the catalog lists the server's tool as deferred, load_tool brings it in, the call asks
    (permission_request) and runs once allowed; the tool line names the server."""
    openai_server.script(
        Turn.call("load_tool", {"names": ["mcp__hostile__echo"]}, id="c1"),
        Turn.call("mcp__hostile__echo", {"text": "from the agent"}, id="c2"),
        Turn.say("done"),
    )
    cfg = config(tmp_path, {"hostile": hostile(tmp_path)}, openai_base_url=openai_server.url, openai_api_key="k",
                 permission_mode="auto")
    async with AstroApp(cfg, tuning=FAST) as app:
        handle = await app.runtime.start_run("echo something")
        events = []
        async for _, event in handle.events():
            events.append(event)
            if isinstance(event, PermissionRequest):
                handle.answer(event.request_id, "allow")
    first = openai_server.chat_requests[0]
    system = first["messages"][0]["content"]
    assert "mcp__hostile__echo" in system  # in the deferred catalog
    assert "mcp__hostile__echo" not in {t["function"]["name"] for t in first.get("tools", [])}
    second_tools = {t["function"]["name"] for t in openai_server.chat_requests[1]["tools"]}
    assert "mcp__hostile__echo" in second_tools
    [request] = [e for e in events if isinstance(e, PermissionRequest)]
    assert request.name == "mcp__hostile__echo"
    call = next(e for e in events if isinstance(e, ToolCall) and e.name == "mcp__hostile__echo")
    result = next(e for e in events if isinstance(e, ToolResult) and e.tool_call_id == call.id)
    assert result.output == "echo: from the agent" and result.metadata["mcp_server"] == "hostile"
    assert calls_reached(tmp_path) == ["echo"]


@pytest.mark.asyncio
async def test_cancelling_a_call_mid_way_leaves_the_server_usable(tmp_path):
    rules = [{"action": "allow", "tool": "mcp__hostile__*"}]
    async with AstroApp(config(tmp_path, {"hostile": hostile(tmp_path)}, permission_rules=rules)) as app:
        cancelled = asyncio.Event()
        call = asyncio.create_task(app.run_tool("mcp__hostile__hang", {}, cancelled=cancelled))
        deadline = asyncio.get_running_loop().time() + 30
        while "hang" not in calls_reached(tmp_path):  # the server has the call
            assert asyncio.get_running_loop().time() < deadline and not call.done()
            await asyncio.sleep(0.02)
        cancelled.set()
        stopped = await asyncio.wait_for(call, 10)
        assert stopped.is_error and "cancel" in stopped.content.lower()
        after = await app.run_tool("mcp__hostile__echo", {"text": "still here"})
        assert after.content == "echo: still here"


@pytest.mark.asyncio
async def test_a_streamable_http_server_with_headers(tmp_path, sesame_server):
    """The URL + headers form, against a real streamable-HTTP MCP server (our own ``astro-jupyter mcp
    --http``, another library); a wrong token leaves the server failed with the reason, not the run."""
    from tests.mcp_io.test_server import _env, _start_http

    proc, url = _start_http(_env(tmp_path / "other", sesame_server.url, ASTRO_MCP_TOKEN="tok-123"), "127.0.0.1:0")
    try:
        servers = {"astro2": {"url": url, "headers": {"Authorization": "Bearer tok-123"}},
                   "locked": {"url": url, "headers": {"Authorization": "Bearer wrong"}}}
        rules = [{"action": "allow", "tool": "mcp__astro2__query_target"}]
        async with AstroApp(config(tmp_path, servers, permission_rules=rules)) as app:
            resolved = await app.run_tool("mcp__astro2__query_target", {"name": "M 31"})
            assert not resolved.is_error and "00:42:44.33" in resolved.content
            report = {s["name"]: s for s in (await app.diagnose())["mcp"]["servers"]}
        assert report["astro2"]["state"] == "ready" and "mcp__astro2__search_papers" in report["astro2"]["tools"]
        assert report["locked"]["state"].startswith("failed") and "error response" in report["locked"]["state"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.asyncio
async def test_a_stdio_server_gets_its_own_env_not_our_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ours")
    monkeypatch.setenv("ADS_API_TOKEN", "ads-ours")
    entry = {**hostile(tmp_path), "env": {"GIVEN": "yes"}}
    rules = [{"action": "allow", "tool": "mcp__hostile__getenv"}]
    async with AstroApp(config(tmp_path, {"hostile": entry}, permission_rules=rules)) as app:
        seen = {name: (await app.run_tool("mcp__hostile__getenv", {"name": name})).content
                for name in ("GIVEN", "OPENAI_API_KEY", "ADS_API_TOKEN", "ASTRO_HOME")}
    assert seen == {"GIVEN": "yes", "OPENAI_API_KEY": "<unset>", "ADS_API_TOKEN": "<unset>", "ASTRO_HOME": "<unset>"}
