"""A run against a local model's server (the scripted fake in its wire shapes): a cut-off answer is
said, a call cut mid-arguments is never run, the context is sized to the model's window, an
overflow error compacts and retries once, and a call being written is announced."""

from __future__ import annotations

import json
from typing import Any

import pytest

from astro_jupyter.agent.context import ContextMeter, raw_tokens
from astro_jupyter.agent.tools import build_default_registry
from astro_jupyter.agent.tools.astro.note import SaveNoteTool
from astro_jupyter.events import Compaction, Done, Error, ToolCall, ToolCallPreparing, ToolResult, Truncated
from astro_jupyter.agent.compaction import CompactionPolicy
from tests.agent.runtime_helpers import collect, fast, make_config, running
from tests.fakes.openai_server import FakeOpenAIServer, ScriptedCall, Turn

NAMES = ["M 31", "M 87", "Sgr A*", "NGC 1275"]


def events_of(items: list[tuple[int, Any]]) -> list[Any]:
    return [e for _, e in items]


async def run(config: Any, prompt: str, *tools: Any) -> list[Any]:
    # the memory bridge would add LLM calls the scripts here do not expect
    async with running(config, *tools, tuning=fast(compaction=CompactionPolicy(memory_bridge=False))) as (services, runtime):
        handle = await runtime.start_run(prompt)
        return events_of(await collect(handle))


@pytest.mark.asyncio
async def test_a_cut_off_answer_is_said_not_passed_off_as_finished(tmp_path, openai_server):
    openai_server.props = {"default_generation_settings": {"n_ctx": 4096}}
    openai_server.script(Turn(endless=True, chunk_size=1))
    events = await run(make_config(tmp_path, openai_server.url), "Tell me everything about M 31.")
    cut = [e for e in events if isinstance(e, Truncated)]
    assert len(cut) == 1 and cut[0].max_tokens == 1024 and cut[0].tool_name == ""
    assert "cut off" in cut[0].message and "1024 tokens" in cut[0].message
    assert isinstance(events[-1], Done) and events[-1].reason == "finished"
    assert openai_server.chat_requests[0]["max_tokens"] == 1024


@pytest.mark.asyncio
async def test_a_call_cut_mid_arguments_is_never_run_and_the_model_is_told(tmp_path, openai_server, sesame_server):
    openai_server.script(
        Turn.calls_(ScriptedCall("save_note", '{"title": "M 31", "body": "Andromeda is at'), finish_reason="length"),
        Turn.say("Saved nothing; here is a short answer instead."),
    )
    events = await run(make_config(tmp_path, openai_server.url, sesame_server.url), "note M 31", SaveNoteTool())
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error and "output token limit" in result.output and "not run" in result.output
    assert result.metadata.get("cut_off") is True
    cut = next(e for e in events if isinstance(e, Truncated))
    assert cut.tool_name == "save_note" and "was not run" in cut.message
    told = openai_server.chat_requests[1]["messages"][-1]
    assert told["role"] == "tool" and "output token limit" in told["content"]
    assert events[-1].reason == "finished"


def _chain(steps: int, final: str = "All resolved."):
    """Answers one query_target call per turn (``steps`` of them), then ``final``; summaries when asked.
    Steps are counted by the results it has seen, not by messages (compaction drops those)."""
    seen: set[str] = set()

    def respond(body: dict[str, Any]) -> Turn:
        if str(body["messages"][0].get("content", "")).startswith("You compress"):
            return Turn.say("- resolved several targets with query_target; continue with the rest")
        seen.update(m["tool_call_id"] for m in body["messages"] if m["role"] == "tool")
        done = len(seen)
        if done < steps:
            return Turn.call("query_target", {"name": NAMES[done % 4]}, text=f"Step {done}: resolving. ")
        return Turn.say(final)

    return respond


@pytest.mark.asyncio
async def test_compaction_starts_from_the_models_window_not_a_fixed_80k(tmp_path, openai_server, sesame_server):
    openai_server.props = {"default_generation_settings": {"n_ctx": 2048}}
    openai_server.respond_with(_chain(12))
    config = make_config(tmp_path, openai_server.url, sesame_server.url, max_steps=30)
    assert CompactionPolicy().soft_limit_tokens == 80_000
    events = await run(config, "Resolve a dozen targets one by one.")
    assert events[-1].reason == "finished", [e for e in events if isinstance(e, Error)]
    assert any(isinstance(e, Compaction) and e.layer == "auto" and "summarised" in e.message for e in events)
    budget = 2048 - 512  # the window less the answer's bound
    sizes = [openai_server.count_tokens(b) for b in openai_server.chat_requests]
    assert max(sizes) <= budget, sizes


@pytest.mark.asyncio
async def test_an_overflow_error_compacts_and_retries_once(tmp_path, openai_server, sesame_server):
    openai_server.n_ctx = 1500  # the server's real window; the setting below claims far more
    openai_server.respond_with(_chain(10))
    config = make_config(tmp_path, openai_server.url, sesame_server.url, llm_context_window=100_000, max_steps=30)
    events = await run(config, "Resolve ten targets one by one.")
    assert openai_server.overflows == 1
    assert events[-1].reason == "finished", [e.message for e in events if isinstance(e, Error)]
    assert any(isinstance(e, Compaction) and "summarised" in e.message for e in events)
    assert not any(isinstance(e, Error) for e in events)
    assert sum(isinstance(e, ToolCall) for e in events) == 10  # no step lost or repeated


@pytest.mark.asyncio
async def test_an_overflow_that_compaction_cannot_fix_ends_with_a_clear_message(tmp_path, openai_server):
    openai_server.n_ctx = 60  # smaller than the system prompt alone
    openai_server.script(Turn.say("never sent"))
    events = await run(make_config(tmp_path, openai_server.url), "hello")
    error = next(e for e in events if isinstance(e, Error))
    assert "does not fit" in error.message and "still too long after compacting" in error.message
    assert "llm_context_window" in error.message and error.reason == "context_overflow"
    assert len(openai_server.chat_requests) == 2 and events[-1].reason == "error"


@pytest.mark.asyncio
async def test_a_call_being_written_is_announced_before_it_arrives(tmp_path, openai_server, sesame_server):
    openai_server.script(
        Turn.call("query_target", {"name": "M 31", "comment": "a long argument " * 120}, chunk_size=40),
        Turn.say("done"),
    )
    events = await run(make_config(tmp_path, openai_server.url, sesame_server.url), "M 31?")
    preparing = [e for e in events if isinstance(e, ToolCallPreparing)]
    call = next(e for e in events if isinstance(e, ToolCall))
    assert preparing and preparing[0].name == "query_target" and preparing[0].step == 1
    assert events.index(preparing[0]) < events.index(call)
    assert all(p.chars < len(json.dumps(call.arguments)) for p in preparing)


def test_the_estimate_counts_tool_schemas_and_adopts_the_servers_count(astro_config) -> None:
    tools = build_default_registry(astro_config).resident_definitions()
    messages = [{"role": "system", "content": "You are astro."}, {"role": "user", "content": "Where is M 31?"}]
    server = FakeOpenAIServer(chars_per_token=3.0)  # a tokenizer that counts more than chars/4
    counted = server.count_tokens({"messages": messages, "tools": tools})
    meter = ContextMeter()
    assert meter.estimate(messages) < counted / 5  # messages alone: what the old estimate saw
    meter.set_tools(tools)
    before = meter.estimate(messages)
    assert before == raw_tokens(messages, tools) and abs(before - counted * 0.75) <= 2
    meter.sending(messages)
    meter.calibrate({"prompt_tokens": counted, "completion_tokens": 3})
    assert abs(meter.estimate(messages) - counted) <= 2
    meter.calibrate({"prompt_tokens": 10})  # implausible (not about this request): ignored
    assert abs(meter.estimate(messages) - counted) <= 2


def test_resident_tool_schemas_of_a_plain_question_fit_in_6_kb(astro_config) -> None:
    registry = build_default_registry(astro_config)
    resident = registry.resident_definitions()
    size = len(json.dumps(resident))
    assert size <= 6000, size
    names = {d["function"]["name"] for d in resident}
    assert {"search_papers", "query_target", "rag_search", "read_file", "load_tool"} <= names
    assert len(names) <= 8 and len(registry) - len(names) >= 15  # the rest are found through the catalog


@pytest.mark.asyncio
async def test_the_research_log_marks_a_cut_off_answer(tmp_path, openai_server):
    from astro_jupyter.export import export_session

    openai_server.props = {"default_generation_settings": {"n_ctx": 1024}}
    openai_server.script(Turn(endless=True, chunk_size=1))
    async with running(make_config(tmp_path, openai_server.url)) as (services, runtime):
        handle = await runtime.start_run("Tell me everything about M 31.")
        await collect(handle)
        await handle.bus.aclose()  # ``done`` reaches watchers before the last batch is stored (settle_session)
        nb = await export_session(services, handle.session_id)
    marks = [c.source for c in nb.cells if c.source.startswith("**Cut off:**")]
    assert len(marks) == 1 and "The answer was cut off: the model reached its output limit of 256 tokens" in marks[0]
