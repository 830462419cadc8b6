"""``astro-jupyter ask`` and ``doctor`` against a local model's server (the scripted fake)."""

from __future__ import annotations

import json

from tests.cli.test_cli import cli_env, run_cli
from tests.fakes.openai_server import ScriptedCall, Turn


def test_a_cut_off_answer_exits_3_and_says_why(tmp_path, openai_server):
    openai_server.props = {"default_generation_settings": {"n_ctx": 1024}}  # llama-server -c 1024
    env = cli_env(tmp_path / "home", openai_server.url)
    openai_server.script(Turn(endless=True, chunk_size=1))
    proc = run_cli(env, "ask", "Tell me everything about M 31.", "--json")
    assert proc.returncode == 3, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    cut = [e for e in events if e["type"] == "truncated"]
    assert len(cut) == 1 and cut[0]["max_tokens"] == 256 and "cut off" in cut[0]["message"]
    assert events[-1] == {**events[-1], "type": "done", "reason": "finished"}
    assert "the answer is incomplete" in proc.stderr

    openai_server.script(Turn(endless=True, chunk_size=1))
    human = run_cli(env, "ask", "Again, all of it.")
    assert human.returncode == 3 and "[cut off: The answer was cut off" in human.stdout


def test_a_cut_tool_call_the_model_recovers_from_exits_0(tmp_path, openai_server, sesame_server):
    env = cli_env(tmp_path / "home", openai_server.url, sesame_server.url)
    openai_server.script(Turn.calls_(ScriptedCall("query_target", '{"name": "M 3'), finish_reason="length"),
                         Turn.call("query_target", {"name": "M 31"}), Turn.say("M 31 is in Andromeda."))
    proc = run_cli(env, "ask", "Where is M 31?")
    assert proc.returncode == 0, proc.stderr
    assert "[cut off: The model reached its output limit" in proc.stdout and "was not run" in proc.stdout
    assert len(sesame_server.requests) == 1  # only the complete call ran


def test_doctor_says_what_the_endpoint_can_do(tmp_path, openai_server):
    openai_server.models = ["gemma-3-1b-it", "nomic-embed-text"]
    openai_server.props = {"default_generation_settings": {"n_ctx": 8192}}

    def answer(body):
        if body.get("tool_choice") == "required":
            return Turn.call("ping", {})
        return Turn.say("OK")

    openai_server.respond_with(answer)
    env = cli_env(tmp_path / "home", openai_server.url)
    env["LLM_MODEL"] = "gemma-3-1b-it"
    proc = run_cli(env, "doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    llm = json.loads(proc.stdout)["llm"]
    assert llm["model_names"] == ["gemma-3-1b-it", "nomic-embed-text"]
    cap = llm["capabilities"]
    assert cap["streams"] is True and cap["calls_tools"] is True
    assert (cap["context_window"], cap["context_source"]) == (8192, "llama.cpp /props n_ctx")
    assert cap["embeddings"] is True and cap["embeddings_model"] == "nomic-embed-text"
    tool_probe = next(b for b in openai_server.chat_requests if b.get("tools"))
    assert tool_probe["tool_choice"] == "required" and tool_probe["tools"][0]["function"]["name"] == "ping"

    # a server that drops tools and has no embeddings (llama-cpp-python without tool_choice, no --embeddings)
    openai_server.respond_with(lambda body: Turn.say("pong"))
    openai_server.embeddings_status = 501
    human = run_cli(env, "doctor")
    assert "Streams        yes" in human.stdout
    assert "Calls tools    NO: asked to call a tool (tool_choice: required), it answered with text" in human.stdout
    assert "Context        8,192 tokens (llama.cpp /props n_ctx)" in human.stdout
    assert "Serves embeddings NO" in human.stdout
