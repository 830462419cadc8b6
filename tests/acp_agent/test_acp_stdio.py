"""``astro-jupyter acp`` as a subprocess, driven over stdio by the SDK's own client side,
against the scripted OpenAI server and the fake Sesame server."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities
from acp.stdio import spawn_agent_process

from tests.acp_agent.client import RecordingClient
from tests.cli.test_cli import cli_env
from tests.fakes.openai_server import Turn

ROOT = Path(__file__).resolve().parents[2]
AGENT = (sys.executable, "-m", "astro_jupyter.cli", "acp")


def acp_env(tmp_path: Path, openai_url: str, sesame_url: str) -> dict[str, str]:
    env = cli_env(tmp_path / "home", openai_url, sesame_url)
    env["ASTRO_PROJECT_ROOT"] = str(tmp_path / "project")
    (tmp_path / "project").mkdir(exist_ok=True)
    return env


SCRIPT = (
    Turn.calls_(("todo_write", {"todos": [{"id": "1", "content": "Resolve M 31", "status": "in_progress"},
                                          {"id": "2", "content": "Write a note", "status": "pending"}]}),
                ("query_target", {"name": "M 31"}), reasoning="I should resolve the target first."),
    Turn.call("file_write", {"path": "m31.md", "content": "# M 31\nRA 00:42:44.33\n"}, id="w1"),
    Turn.say("M 31 is at RA 00:42:44.33; the note is in m31.md."),
)


@pytest.mark.asyncio
async def test_a_whole_prompt_with_a_tool_call_and_a_permission(tmp_path, openai_server, sesame_server):
    openai_server.script(*SCRIPT)
    env = acp_env(tmp_path, openai_server.url, sesame_server.url)
    client = RecordingClient(lambda options: "allow")
    async with spawn_agent_process(client, *AGENT, env=env, cwd=str(tmp_path / "project")) as (conn, proc):
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
        assert init.agent_capabilities.load_session is True and init.agent_info.name == "astro-jupyter"
        new = await conn.new_session(cwd=str(tmp_path / "project"), mcp_servers=[])
        assert new.modes.current_mode_id == "default"
        assert [m.id for m in new.modes.available_modes] == ["default", "coordinator"]
        model = new.config_options[0]
        assert model.id == "model" and model.category == "model" and model.current_value in [o.value for o in model.options]
        answer = await conn.prompt(session_id=new.session_id, prompt=[text_block("Where is M 31? Write a note.")])
    assert answer.stop_reason == "end_turn"
    assert client.text() == "M 31 is at RA 00:42:44.33; the note is in m31.md."
    assert client.text("agent_thought_chunk") == "I should resolve the target first."
    plan = client.of("plan")[0]
    assert [(e.content, e.status) for e in plan.entries] == [("Resolve M 31", "in_progress"), ("Write a note", "pending")]
    starts = {u.tool_call_id: u for u in client.of("tool_call")}
    target = next(u for u in starts.values() if u.title == "query_target M 31")
    assert target.kind == "fetch" and target.status == "pending" and target.raw_input == {"name": "M 31"}
    done = [u for u in client.of("tool_call_update") if u.tool_call_id == target.tool_call_id and u.status]
    assert done[-1].status == "completed" and "00:42:44.33" in done[-1].content[0].content.text
    write = starts["w1"]
    project = tmp_path / "project"
    assert write.kind == "edit" and write.locations[0].path == str(project / "m31.md")
    assert write.content[0].type == "diff" and write.content[0].new_text.startswith("# M 31")
    # the permission question, with the options the sidebar offers, and what allowing it did
    (call, options), = client.questions
    assert call.tool_call_id == "w1" and call.title == "file_write m31.md"
    assert call.content[0].type == "diff" and call.content[0].path == str(tmp_path / "project" / "m31.md")  # shown when asked
    assert [(o.option_id, o.name, o.kind) for o in options] == [
        ("allow", "Allow", "allow_once"), ("always", "Always allow", "allow_always"), ("deny", "Deny", "reject_once")]
    assert (project / "m31.md").read_text() == "# M 31\nRA 00:42:44.33\n"
    result = [u for u in client.of("tool_call_update") if u.tool_call_id == "w1" and u.status][-1]
    assert result.status == "completed" and result.locations[0].path == str(project / "m31.md")
    assert result.content is None and result.raw_output["output"].startswith("Created m31.md")  # the diff stays

    # the session is ours: listed by the CLI, and a new connection loads it with its history replayed
    listed = await asyncio.create_subprocess_exec(sys.executable, "-m", "astro_jupyter.cli", "sessions", "--json",
                                                  env=env, stdout=asyncio.subprocess.PIPE)
    out, _ = await listed.communicate()
    assert new.session_id in [s["id"] for s in json.loads(out)]
    again = RecordingClient()
    async with spawn_agent_process(again, *AGENT, env=env, cwd=str(project)) as (conn, _proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        loaded = await conn.load_session(cwd=str(project), session_id=new.session_id, mcp_servers=[])
        assert loaded.modes.current_mode_id == "default"
    assert again.text("user_message_chunk") == "Where is M 31? Write a note."
    assert again.text() == client.text()
    assert {u.tool_call_id for u in again.of("tool_call")} == set(starts)


@pytest.mark.asyncio
async def test_client_file_system_is_used_when_offered(tmp_path, openai_server, sesame_server):
    project = tmp_path / "project"
    openai_server.script(
        Turn.call("read_file", {"path": "data.txt"}, id="r1"),
        Turn.call("file_edit", {"path": "data.txt", "old_string": "editor", "new_string": "edited"}, id="e1"),
        Turn.call("file_write", {"path": "out.txt", "content": "copied\n"}, id="w1"),
        Turn.say("Done."),
    )
    env = acp_env(tmp_path, openai_server.url, sesame_server.url)
    (project / "data.txt").write_text("on disk\n")
    # the editor has unsaved text in its buffer: the agent must read that, not the disk
    client = RecordingClient(lambda options: "allow", buffers={str(project / "data.txt"): "in the editor buffer\n"})
    caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True))
    async with spawn_agent_process(client, *AGENT, env=env, cwd=str(project)) as (conn, _proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps)
        new = await conn.new_session(cwd=str(project), mcp_servers=[])
        await conn.prompt(session_id=new.session_id, prompt=[text_block("copy it")])
    assert client.reads == [str(project / "data.txt")] * 2  # read_file, then file_edit
    read = [u for u in client.of("tool_call_update") if u.tool_call_id == "r1" and u.status][-1]
    assert "in the editor buffer" in read.content[0].content.text
    # the edit applies to the buffer's text and is written back through the editor, as is the new file
    assert client.writes == [(str(project / "data.txt"), "in the edited buffer\n"), (str(project / "out.txt"), "copied\n")]



@pytest.mark.asyncio
async def test_a_client_that_disconnects_mid_run_cancels_it_and_loses_nothing(tmp_path, openai_server, sesame_server):
    from astro_jupyter.app import AstroApp
    from astro_jupyter.config import AstroConfig

    full = "star " * 300
    openai_server.script(Turn.say(full, delay=0.02, chunk_size=5))
    env = acp_env(tmp_path, openai_server.url, sesame_server.url)
    client = RecordingClient()
    async with spawn_agent_process(client, *AGENT, env=env, cwd=str(tmp_path / "project")) as (conn, proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        new = await conn.new_session(cwd=str(tmp_path / "project"), mcp_servers=[])
        prompt = asyncio.create_task(conn.prompt(session_id=new.session_id, prompt=[text_block("talk")]))
        await client.wait_for(lambda: len(client.of("agent_message_chunk")) >= 3)
        proc.stdin.close()  # the editor went away
        assert await asyncio.wait_for(proc.wait(), 60) == 0
        stderr = (await proc.stderr.read()).decode()
        prompt.cancel()
    assert "Traceback" not in stderr, stderr
    async with AstroApp(AstroConfig(home=str(tmp_path / "home")), source="test") as app:
        (run,) = (await app.get_session(None, new.session_id))["runs"]
        stored = (await app.session_events(None, new.session_id))["events"]
    assert run["status"] == "cancelled"
    said = "".join(e["event"].get("delta", "") for e in stored if e["event"]["type"] == "text_delta")
    assert full.startswith(client.text()) and said.startswith(client.text()) and len(said) < len(full)
    assert stored[-1]["event"] == {"type": "done", "session_id": new.session_id, "run_id": run["id"], "reason": "cancelled"}


@pytest.mark.asyncio
async def test_malformed_requests_get_json_rpc_errors_and_no_traceback(tmp_path, openai_server, sesame_server):
    env = acp_env(tmp_path, openai_server.url, sesame_server.url)
    proc = await asyncio.create_subprocess_exec(*AGENT, env=env, cwd=str(tmp_path / "project"), stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    lines = [
        "this is not json",
        "[1, 2, 3]",
        '{"jsonrpc": "2.0", "id": 1, "method": 42}',
        '{"jsonrpc": "2.0", "id": 2, "method": "no/such_method", "params": {}}',
        '{"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": "ses_x"}}',
        '{"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": "hello"}',
        '{"jsonrpc": "2.0", "id": 5, "method": "session/prompt", '
        '"params": {"sessionId": "ses_nope", "prompt": [{"type": "text", "text": "hi"}]}}',
        '{"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": {"protocolVersion": 1}}',
    ]
    proc.stdin.write(("\n".join(lines) + "\n").encode())
    await proc.stdin.drain()
    replies = [json.loads(await asyncio.wait_for(proc.stdout.readline(), 60)) for _ in lines]
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    stderr = (await proc.stderr.read()).decode()
    errors = {r.get("id"): r.get("error", {}).get("code") for r in replies if "error" in r}
    unnumbered = [r["error"]["code"] for r in replies if r.get("id") is None]
    assert sorted(unnumbered) == [-32700, -32600]  # not JSON; not an object
    assert errors[1] == -32600 and errors[2] == -32601 and errors[3] == -32602 and errors[4] == -32602
    assert errors[5] == -32002
    assert next(r for r in replies if r.get("id") == 6)["result"]["agentInfo"]["name"] == "astro-jupyter"
    assert "Traceback" not in stderr, stderr
