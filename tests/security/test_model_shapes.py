"""Door 8: a model message of the wrong shape ends in a clean ``error`` event or tool error, no traceback.

The scripted server streams hand-made chunks (``Turn.raw``) to the real ``openai`` client and the
real runtime. "Clean" means: the run ends with ``done``; any ``error`` event names the problem and
is not an ``internal`` error; nothing was logged with a traceback.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.agent.runtime_helpers import collect, make_config, running, wires
from tests.fakes.openai_server import Turn, raw_delta


def _call(index: Any = 0, id: Any = "c1", name: Any = "query_target", arguments: Any = '{"name": "M 87"}') -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


async def _run(tmp_path: Path, openai_server: Any, sesame_server: Any, *turns: Turn) -> tuple[list[dict[str, Any]], Any]:
    openai_server.script(*turns)
    async with running(make_config(tmp_path, openai_server.url, sesame_server.url)) as (services, runtime):
        handle = await runtime.start_run("look up M 87")
        events = wires(await collect(handle))
        await handle.wait()  # the run's events are flushed to the store before it returns
        stored = [d for _, d in await services.runs.events_after(handle.run_id)]
    assert stored == events  # nothing lost on the way to the store
    return events, openai_server


def _no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not bad, [r.getMessage() for r in bad]


@pytest.mark.parametrize(
    "payload, words",
    [
        (raw_delta({"content": 42}), "choices[0].delta.content is a number, expected a string"),
        (raw_delta({"content": ["a", "b"]}), "choices[0].delta.content is an array"),
        (raw_delta({"content": {"text": "x"}}), "choices[0].delta.content is an object"),
        (raw_delta("just text"), "choices[0].delta is a string"),
        ({"id": "x", "object": "chat.completion.chunk", "choices": "nope"}, "'choices' is a string"),
        ({"id": "x", "choices": [7]}, "choices[0] is a number"),
        (raw_delta({"tool_calls": {"index": 0}}), "tool_calls is an object, expected an array"),
        (raw_delta({"tool_calls": ["call"]}), "tool_calls[0] is a string"),
        (raw_delta(_call(index="first")), 'tool_calls[0].index is "first", expected a non-negative integer'),
        (raw_delta(_call(index=1.5)), "tool_calls[0].index is 1.5"),
        (raw_delta(_call(index=-1)), "tool_calls[0].index is -1"),
        (raw_delta({"tool_calls": [{"index": 0, "function": "query_target"}]}), "tool_calls[0].function is a string"),
        ([1, 2, 3], "a chunk is an array"),
        (12345, "a chunk is a number"),
        ('"a string chunk"', "a chunk is a string"),
    ],
)
@pytest.mark.asyncio
async def test_unusable_shapes_end_in_a_clean_error(tmp_path, openai_server, sesame_server, caplog, payload, words):
    events, _ = await _run(tmp_path, openai_server, sesame_server, Turn.raw(payload))
    errors = [e for e in events if e["type"] == "error"]
    assert len(errors) == 1 and errors[0]["reason"] == "llm", errors
    assert "Malformed answer from the LLM endpoint" in errors[0]["message"] and words in errors[0]["message"]
    assert events[-1]["type"] == "done" and events[-1]["reason"] == "error"
    _no_tracebacks(caplog)


@pytest.mark.asyncio
async def test_numeric_call_id_gets_an_id_and_the_call_runs(tmp_path, openai_server, sesame_server, caplog):
    events, server = await _run(
        tmp_path, openai_server, sesame_server,
        Turn.raw(raw_delta(_call(id=12345)), raw_delta({}, "tool_calls")), Turn.say("M 87 found."),
    )
    call = next(e for e in events if e["type"] == "tool_call")
    result = next(e for e in events if e["type"] == "tool_result")
    assert isinstance(call["id"], str) and call["id"].startswith("call_") and result["tool_call_id"] == call["id"]
    assert not result["is_error"] and "12:30:49" in result["output"]
    assert events[-1]["reason"] == "finished"
    sent = server.chat_requests[1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == call["id"] and sent[-1]["tool_call_id"] == call["id"]
    _no_tracebacks(caplog)


@pytest.mark.parametrize("name, shown", [(7, "'7'"), (["query_target"], "'[\"query_target\"]'"), ({"n": 1}, "'{\"n\": 1}'"), (True, "'true'")])
@pytest.mark.asyncio
async def test_non_string_tool_name_is_an_unknown_tool_error(tmp_path, openai_server, sesame_server, caplog, name, shown):
    events, server = await _run(
        tmp_path, openai_server, sesame_server,
        Turn.raw(raw_delta(_call(name=name)), raw_delta({}, "tool_calls")), Turn.say("Sorry."),
    )
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["is_error"] and f"unknown tool {shown}" in result["output"]
    assert events[-1]["reason"] == "finished" and not [e for e in events if e["type"] == "error"]
    assert all(isinstance(m.get("content"), str) for m in server.chat_requests[1]["messages"])
    _no_tracebacks(caplog)


@pytest.mark.asyncio
async def test_arguments_as_object_or_number(tmp_path, openai_server, sesame_server, caplog):
    events, _ = await _run(
        tmp_path, openai_server, sesame_server,
        Turn.raw(raw_delta(_call(id="a", arguments={"name": "M 87"})), raw_delta(_call(index=1, id="b", arguments=5)),
                 raw_delta({}, "tool_calls")),
        Turn.say("ok"),
    )
    results = {e["tool_call_id"]: e for e in events if e["type"] == "tool_result"}
    assert not results["a"]["is_error"] and "12:30:49" in results["a"]["output"]  # an object is what was meant
    assert results["b"]["is_error"] and "arguments must be a JSON object, got integer" in results["b"]["output"]
    assert events[-1]["reason"] == "finished"
    _no_tracebacks(caplog)


@pytest.mark.parametrize("depth", [100_000, 2_000, 33])
@pytest.mark.asyncio
async def test_deeply_nested_arguments_are_a_tool_error(tmp_path, openai_server, sesame_server, caplog, depth):
    deep = '{"name": ' + "[" * depth + "]" * depth + "}"
    events, _ = await _run(tmp_path, openai_server, sesame_server,
                           Turn.call("query_target", deep, id="d1", chunk_size=50_000), Turn.say("I will stop."))
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["is_error"] and "arguments nest deeper than 32 levels" in result["output"]
    assert events[-1]["reason"] == "finished" and not [e for e in events if e["type"] == "error"]
    _no_tracebacks(caplog)


@pytest.mark.asyncio
async def test_deeply_nested_chunk_is_a_clean_error(tmp_path, openai_server, sesame_server, caplog):
    """The nesting is in the chunk itself: the openai client's own JSON decoder gives up."""
    deep = "[" * 100_000 + "]" * 100_000
    payload = '{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":' + deep + "}}]}"
    events, _ = await _run(tmp_path, openai_server, sesame_server, Turn.raw(payload))
    errors = [e for e in events if e["type"] == "error"]
    assert len(errors) == 1 and errors[0]["reason"] == "llm" and "Malformed answer" in errors[0]["message"]
    assert events[-1]["reason"] == "error"
    _no_tracebacks(caplog)
