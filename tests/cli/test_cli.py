"""The ``astro-jupyter`` CLI in subprocesses, against the fake LLM and fake Sesame servers."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any


from astro_jupyter.config import AstroConfig
from astro_jupyter.services.container import ServiceContainer
from tests.fakes.openai_server import Turn
from tests.waiting import until_sync

ROOT = Path(__file__).resolve().parents[2]


def cli_env(home: Path, llm_url: str = "", sesame_url: str = "http://127.0.0.1:9") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_", "ASTRO_"))}
    env.update(ASTRO_HOME=str(home), ASTRO_SESAME_URL=sesame_url, PYTHONPATH=str(ROOT))
    if llm_url:
        env.update(OPENAI_BASE_URL=llm_url, OPENAI_API_KEY="k")
    return env


def run_cli(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "astro_jupyter.cli", *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def test_ask_json_lines_are_wire_events(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.call("query_target", {"name": "M 31"}, id="c1"), Turn.say("M 31 is the Andromeda galaxy."))
    env = cli_env(tmp_path / "home", openai_server.url, sesame_server.url)
    proc = run_cli(env, "ask", "Where is M 31?", "--json")
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[0]["type"] == "session" and events[-1]["type"] == "done" and events[-1]["reason"] == "finished"
    call = next(e for e in events if e["type"] == "tool_call")
    assert call == {"type": "tool_call", "id": "c1", "name": "query_target", "arguments": {"name": "M 31"}, "step": 1}
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["tool_call_id"] == "c1" and "00:42:44.33" in result["output"]
    assert "".join(e["delta"] for e in events if e["type"] == "text_delta") == "M 31 is the Andromeda galaxy."
    # the session is listed and can be resumed
    sessions = json.loads(run_cli(env, "sessions", "--json").stdout)
    assert [s["id"] for s in sessions] == [events[0]["session_id"]] and sessions[0]["title"] == "Where is M 31?"
    openai_server.script(Turn.say("It is 2.5 million light years away."))
    again = run_cli(env, "ask", "How far?", "--session", events[0]["session_id"])
    assert again.returncode == 0, again.stderr
    assert "It is 2.5 million light years away." in again.stdout
    assert [m["role"] for m in openai_server.chat_requests[-1]["messages"]] == ["system", "user", "assistant", "tool", "assistant", "user"]


def test_ask_human_timeline(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.call("query_target", {"name": "M 87"}), Turn.say("Done."))
    proc = run_cli(cli_env(tmp_path / "home", openai_server.url, sesame_server.url), "ask", "M 87?")
    assert proc.returncode == 0, proc.stderr
    assert '→ query_target({"name": "M 87"})' in proc.stdout
    assert "← query_target (" in proc.stdout and "M 87 (asked: M 87)" in proc.stdout
    assert proc.stdout.rstrip().endswith("Done.")
    assert "[finished · session ses_" in proc.stderr


def test_ask_without_llm_exits_2_with_clear_message(tmp_path):
    proc = run_cli(cli_env(tmp_path / "home"), "ask", "hello")
    assert proc.returncode == 2
    assert "OPENAI_BASE_URL" in proc.stderr and proc.stdout == ""


def test_ask_unreachable_llm_exits_2(tmp_path):
    """A refused connection is said at once, with the endpoint and the reason (not retried: tests/llm/test_client.py)."""
    env = cli_env(tmp_path / "home", "http://127.0.0.1:9/v1")
    proc = run_cli(env, "ask", "hello", "--json", timeout=120)
    assert proc.returncode == 2, proc.stderr
    err = [json.loads(l) for l in proc.stdout.splitlines() if '"error"' in l][0]
    assert "Cannot reach the LLM endpoint at http://127.0.0.1:9/v1 (connection refused)" in err["message"]


def test_tool_command_text_json_and_errors(tmp_path, sesame_server):
    env = cli_env(tmp_path / "home", sesame_url=sesame_server.url)
    ok = run_cli(env, "tool", "query_target", '{"name": "Sgr A*"}')
    assert ok.returncode == 0 and "17:45:40.03" in ok.stdout and "-29:00:28.1" in ok.stdout
    js = run_cli(env, "tool", "query_target", '{"name": "M 31"}', "--json")
    data = json.loads(js.stdout)
    assert js.returncode == 0 and set(data) == {"content", "is_error", "metadata"}
    assert data["is_error"] is False and data["metadata"]["main_id"] == "M 31"
    missing = run_cli(env, "tool", "query_target", '{"name": "Planet Nine"}', "--json")
    assert missing.returncode == 1 and json.loads(missing.stdout)["is_error"] is True
    assert "not found" in json.loads(missing.stdout)["content"]
    bad = run_cli(env, "tool", "query_target", '{"name": ')
    assert bad.returncode == 1 and "JSON" in bad.stderr
    unknown = run_cli(env, "tool", "no_such_tool", "{}")
    assert unknown.returncode == 1 and "no_such_tool" in unknown.stderr


def test_tools_and_doctor(tmp_path, openai_server):
    env = cli_env(tmp_path / "home", openai_server.url)
    tools = run_cli(env, "tools", "--json")
    names = [d["function"]["name"] for d in json.loads(tools.stdout)]
    assert tools.returncode == 0 and "query_target" in names and names == sorted(names)
    doctor = run_cli(env, "doctor", "--json")
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 0, doctor.stdout
    assert report["sqlite"]["fts5"] is True and report["sqlite"]["vec0"] is True
    assert report["llm"]["reachable"] is True and report["llm"]["model_listed"] is True
    assert report["astro_home"] == str(tmp_path / "home")
    human = run_cli(env, "doctor")
    assert "vec0           yes" in human.stdout and "LLM reachable  yes" in human.stdout
    down = run_cli(cli_env(tmp_path / "home"), "doctor")
    assert down.returncode == 2 and "OPENAI_BASE_URL" in down.stdout


def _names_cycle(body: dict[str, Any]) -> Turn:
    names = ["M 31", "M 87", "Sgr A*", "α Cen A"]
    done = sum(1 for m in body["messages"] if m["role"] == "tool")
    return Turn.call("query_target", {"name": names[done % 4]}, text=f"Step {done}. ", chunk_size=2, delay=0.01)


def test_kill_9_mid_run_loses_no_committed_message(tmp_path, openai_server, sesame_server):
    openai_server.respond_with(_names_cycle)
    home = tmp_path / "home"
    env = cli_env(home, openai_server.url, sesame_server.url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "astro_jupyter.cli", "ask", "resolve targets forever", "--json", "--max-steps", "200"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )
    seen: list[dict[str, Any]] = []
    reader_done = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(json.loads(line))
        reader_done.set()

    threading.Thread(target=read, daemon=True).start()
    until_sync(lambda: sum(e["type"] == "tool_result" for e in seen) >= 4 or proc.poll() is not None, "four tool results")
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    # a second process reads the same database while the run is writing
    listing = run_cli(env, "sessions", "--json")
    assert listing.returncode == 0, listing.stderr
    session_id = seen[0]["session_id"]
    assert session_id in [s["id"] for s in json.loads(listing.stdout)]
    results = sum(e["type"] == "tool_result" for e in seen)
    until_sync(lambda: sum(e["type"] == "tool_result" for e in seen) > results, "a later turn")  # kill inside it
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    reader_done.wait(timeout=5)
    announced = [e["tool_call_id"] for e in seen if e["type"] == "tool_result"]
    assert len(announced) >= 4

    async def inspect() -> None:
        services = ServiceContainer(AstroConfig(home=str(home)))
        await services.start()
        try:
            msgs = await services.messages.list(session_id)
            assert msgs[0].role == "user"
            # every tool result the killed process announced is on disk
            stored_results = {m.tool_call_id for m in msgs if m.role == "tool"}
            assert set(announced) <= stored_results
            # every stored turn is complete: an assistant tool-call turn is followed by all its results
            for i, m in enumerate(msgs):
                if m.role == "assistant" and m.tool_calls:
                    ids = [c["id"] for c in m.tool_calls]
                    following = [x.tool_call_id for x in msgs[i + 1 : i + 1 + len(ids)]]
                    assert following == ids
            history = await services.messages.chat_history(session_id)
            assert history[-1]["role"] in {"tool", "assistant", "user"}
            run_status = (await services.runs.list_for_session(session_id))[0].status
            assert run_status == "running"  # nobody closed it: the process died
        finally:
            await services.close()

    asyncio.run(inspect())
    # the next process marks the dead run and resumes the session from its consistent history
    openai_server.respond_with(None)
    openai_server.script(Turn.say("Resumed fine."))
    resumed = run_cli(env, "ask", "continue", "--session", session_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.splitlines()[-1])["reason"] == "finished"
    sent = openai_server.chat_requests[-1]["messages"]
    for i, m in enumerate(sent):  # the API would reject a tool call without its result
        if m.get("tool_calls"):
            assert [x.get("tool_call_id") for x in sent[i + 1 : i + 1 + len(m["tool_calls"])]] == [c["id"] for c in m["tool_calls"]]

    async def statuses() -> list[str]:
        services = ServiceContainer(AstroConfig(home=str(home)))
        await services.start()
        try:
            return [r.status for r in await services.runs.list_for_session(session_id)]
        finally:
            await services.close()

    assert sorted(asyncio.run(statuses())) == ["error", "finished"]  # the dead run was marked at startup


def test_non_interactive_cli_denies_permission_at_once(tmp_path, openai_server, sesame_server):
    openai_server.script(Turn.call("run_bash", {"command": "echo hi"}, id="b1"), Turn.say("ok, not allowed"))
    env = cli_env(tmp_path / "home", openai_server.url, sesame_server.url)
    env["ASTRO_PERMISSION_RULES"] = json.dumps([{"action": "ask", "tool": "run_bash", "reason": "shell commands need a yes"}])
    env["ASTRO_PERMISSION_MODE"] = "ask"
    proc = run_cli(env, "ask", "run something", "--json", timeout=60)  # waiting for an answer would take 300 s
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(l) for l in proc.stdout.splitlines()]
    assert any(e["type"] == "permission_request" and e["name"] == "run_bash" for e in events)
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["is_error"] and result["tool_call_id"] == "b1"
    assert "denied run_bash" in proc.stderr


def test_prompt_from_stdin_and_unknown_session(tmp_path, openai_server):
    openai_server.script(Turn.say("read it"))
    env = cli_env(tmp_path / "home", openai_server.url)
    proc = subprocess.run(
        [sys.executable, "-m", "astro_jupyter.cli", "ask", "-", "--json"], env=env, input="A long\nmulti-line prompt\n",
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert openai_server.chat_requests[0]["messages"][-1]["content"] == "A long\nmulti-line prompt\n"
    missing = run_cli(env, "ask", "hi", "--session", "ses_nope")
    assert missing.returncode == 1 and "no session 'ses_nope'" in missing.stderr


def test_version_and_sessions_help():
    from astro_jupyter import __version__

    proc = run_cli(cli_env(Path("/nonexistent")), "--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"astro-jupyter {__version__}"
    helptext = run_cli(cli_env(Path("/nonexistent")), "sessions", "--help").stdout
    assert "--limit N" in helptext and "list at most N sessions" in helptext


def test_tool_accepts_the_magics_key_value_syntax(tmp_path, sesame_server):
    env = cli_env(tmp_path / "home", sesame_url=sesame_server.url)
    proc = run_cli(env, "tool", "query_target", 'name=M 31', "--json")  # what the shell makes of name="M 31"
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["metadata"]["main_id"] == "M 31"
    quoted = run_cli(env, "tool", "query_target", 'name="Sgr A*"')  # the whole magic line quoted once
    assert quoted.returncode == 0 and "17:45:40.03" in quoted.stdout
    bad = run_cli(env, "tool", "query_target", "M 31")
    assert bad.returncode == 1 and "key=value" in bad.stderr and "Traceback" not in bad.stderr


def test_tool_arguments_follow_the_schema():
    from astro_jupyter.cli import tool_arguments

    schema = {"properties": {"name": {"type": "string"}, "rows": {"type": "integer"}, "ids": {"type": "array"}}}
    assert tool_arguments(["name=5", "rows=5", 'ids=["a","b"]'], schema) == {"name": "5", "rows": 5, "ids": ["a", "b"]}
    assert tool_arguments(['name="M 31" rows=3'], schema) == {"name": "M 31", "rows": 3}
    assert tool_arguments(['{"name": "M 31"}'], schema) == {"name": "M 31"}
    assert tool_arguments([], schema) == {}


def test_max_steps_end_names_the_setting(tmp_path, openai_server, sesame_server):
    openai_server.respond_with(lambda body: Turn.call("query_target", {"name": "M 31"}))
    proc = run_cli(cli_env(tmp_path / "home", openai_server.url, sesame_server.url), "ask", "loop", "--max-steps", "2")
    assert "[max_steps · session" in proc.stderr
    assert "stopped after 2 steps" in proc.stderr and "--max-steps 4" in proc.stderr
    assert "c.AstroConfig.max_steps" in proc.stderr and "ASTRO_MAX_STEPS" in proc.stderr


def test_piping_into_head_exits_quietly(tmp_path):
    env = cli_env(tmp_path / "home")
    proc = subprocess.run(
        f"{sys.executable} -m astro_jupyter.cli tools --json | head -c 10", shell=True, env=env,
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert proc.stdout == '[\n {\n  "ty'
    assert proc.stderr == "", proc.stderr


def test_doctor_without_llm_says_what_to_set(tmp_path):
    proc = run_cli(cli_env(tmp_path / "home"), "doctor")
    assert proc.returncode == 2
    assert "(OpenAI default)" not in proc.stdout
    assert "LLM endpoint   not configured" in proc.stdout
    assert "set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL" in proc.stdout
    report = json.loads(run_cli(cli_env(tmp_path / "home"), "doctor", "--json").stdout)
    assert report["llm"]["configured"] is False and "OPENAI_API_KEY" in report["llm"]["error"]


def test_ask_applies_the_apps_prompt_rules(tmp_path, openai_server):
    """The CLI checks a prompt as the sidebar does (astro_jupyter.app): blank or over the limit → exit 1 (a bad
    argument, as the README's exit codes say; 2 means no LLM endpoint), no run."""
    env = cli_env(tmp_path / "home", openai_server.url)
    too_long = subprocess.run(
        [sys.executable, "-m", "astro_jupyter.cli", "ask", "-"], env=env, input="x" * 100_001,
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert too_long.returncode == 1 and "100001 characters; the limit is 100000" in too_long.stderr
    blank = run_cli(env, "ask", "   ")
    assert blank.returncode == 1 and "non-empty" in blank.stderr
    usage = run_cli(env, "ask", "hi", "--max-steps", "many")  # argparse's usage error, also a bad argument
    assert usage.returncode == 1 and "invalid int value" in usage.stderr
    assert openai_server.chat_requests == []
    assert json.loads(run_cli(env, "sessions", "--json").stdout) == []
