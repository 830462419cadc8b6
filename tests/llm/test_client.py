"""LlmClient against the scripted OpenAI-compatible server, through the real openai client."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import time
from typing import Any

import pytest

from astro_jupyter.config import AstroConfig
from astro_jupyter.errors import LlmError, LlmUnavailableError
from astro_jupyter.llm import Completed, LlmClient, ModelSwitched, TextChunk, ThinkingChunk, ToolCallReady
from astro_jupyter.llm.client import LlmLimits
from tests.fakes.openai_server import NO_ID, ScriptedCall, Turn


def make_client(url: str, **kw: Any) -> LlmClient:
    """Settings go to the config, ``LlmLimits`` fields (max_retries ...) to the client's limits."""
    fields = {f.name for f in dataclasses.fields(LlmLimits)}
    limits = {"retry_base_delay": 0.01, **{k: kw.pop(k) for k in list(kw) if k in fields}}
    return LlmClient(AstroConfig(openai_base_url=url, openai_api_key="test-key", **kw), limits=LlmLimits(**limits))


async def collect(client: LlmClient, messages: list[dict[str, Any]] | None = None, tools: Any = None, **kw: Any) -> list[Any]:
    items = []
    async for item in client.stream(messages or [{"role": "user", "content": "hi"}], tools, **kw):
        items.append(item)
    return items


@pytest.mark.asyncio
async def test_streamed_text_arrives_in_several_deltas(openai_server):
    openai_server.script(Turn.say("The Andromeda galaxy is M 31.", chunk_size=5))
    client = make_client(openai_server.url)
    items = await collect(client)
    deltas = [i.delta for i in items if isinstance(i, TextChunk)]
    assert len(deltas) >= 5
    assert "".join(deltas) == "The Andromeda galaxy is M 31."
    final = items[-1]
    assert isinstance(final, Completed)
    assert final.text == "The Andromeda galaxy is M 31." and final.finish_reason == "stop"
    assert final.message == {"role": "assistant", "content": "The Andromeda galaxy is M 31."}
    assert final.usage.get("total_tokens", 0) > 0
    req = openai_server.chat_requests[0]
    assert req["model"] == "gpt-4o-mini" and req["stream"] is True
    assert {k.lower(): v for k, v in openai_server.requests[0].headers.items()}["authorization"] == "Bearer test-key"
    await client.aclose()


@pytest.mark.asyncio
async def test_tool_calls_split_across_chunks_are_assembled(openai_server):
    args_a = {"name": "M 31", "note": "a long-ish argument value so it spans many chunks"}
    args_b = {"name": "Sgr A*"}
    openai_server.script(
        Turn.calls_(ScriptedCall("query_target", args_a, "call_a"), ScriptedCall("query_target", args_b, "call_b"), chunk_size=3)
    )
    client = make_client(openai_server.url)
    tools = [{"type": "function", "function": {"name": "query_target", "description": "x", "parameters": {"type": "object"}}}]
    items = await collect(client, tools=tools)
    ready = [i for i in items if isinstance(i, ToolCallReady)]
    assert [(c.id, c.name, json.loads(c.arguments_json)) for c in ready] == [
        ("call_a", "query_target", args_a),
        ("call_b", "query_target", args_b),
    ]
    final = items[-1]
    assert isinstance(final, Completed) and final.finish_reason == "tool_calls"
    assert [c["id"] for c in final.message["tool_calls"]] == ["call_a", "call_b"]
    # The first call is handed over before the second one's fragments are read (early start).
    kinds = [i.kind for i in items]
    assert kinds.index("tool_call") < len(kinds) - 2
    assert openai_server.chat_requests[0]["tools"][0]["function"]["name"] == "query_target"
    await client.aclose()


@pytest.mark.asyncio
async def test_first_call_is_ready_while_the_second_is_still_streaming(openai_server):
    # Slow chunks: the first call must be yielded well before the stream ends.
    openai_server.script(
        Turn.calls_(("a", {"x": 1}), ("b", {"y": "z" * 40}), chunk_size=4, delay=0.02)
    )
    client = make_client(openai_server.url)
    stamps: list[tuple[str, float]] = []
    async for item in client.stream([{"role": "user", "content": "go"}], None):
        stamps.append((item.kind, time.perf_counter()))
    first_ready = next(t for k, t in stamps if k == "tool_call")
    end = stamps[-1][1]
    assert end - first_ready > 0.15  # ~11 more chunks of 20 ms followed
    await client.aclose()


@pytest.mark.asyncio
async def test_reasoning_deltas_pass_through(openai_server):
    openai_server.script(Turn.say("42.", reasoning="Let me think about the redshift first.", chunk_size=6))
    client = make_client(openai_server.url)
    items = await collect(client)
    thinking = "".join(i.delta for i in items if isinstance(i, ThinkingChunk))
    assert thinking == "Let me think about the redshift first."
    assert items[-1].thinking == thinking and items[-1].text == "42."
    await client.aclose()


@pytest.mark.asyncio
async def test_three_overloads_switch_to_fallback_then_chain(openai_server):
    openai_server.script(
        Turn.fail(429), Turn.fail(529), Turn.fail(503),  # gpt-4o-mini x3 -> fallback-model
        Turn.fail(529), Turn.fail(500, "upstream says: Overloaded"), Turn.fail(429),  # fallback x3 -> chain-a
        Turn.say("finally"),
    )
    client = make_client(openai_server.url, llm_fallback_model="fallback-model", llm_fallback_chain=["chain-a", "chain-b"])
    items = await collect(client)
    switches = [i for i in items if isinstance(i, ModelSwitched)]
    assert [(s.from_model, s.to_model) for s in switches] == [("gpt-4o-mini", "fallback-model"), ("fallback-model", "chain-a")]
    assert switches[0].reason == "overloaded x3"
    assert openai_server.models_requested() == ["gpt-4o-mini"] * 3 + ["fallback-model"] * 3 + ["chain-a"]
    assert items[-1].text == "finally" and items[-1].model == "chain-a"
    assert client.model == "chain-a"  # the holder keeps the switch for later turns
    await client.aclose()


@pytest.mark.asyncio
async def test_overload_without_fallback_gives_clear_error(openai_server):
    openai_server.script(Turn.fail(529), Turn.fail(529), Turn.fail(529))
    client = make_client(openai_server.url)
    with pytest.raises(LlmError, match="overloaded.*LLM_FALLBACK_MODEL"):
        await collect(client)
    await client.aclose()


@pytest.mark.asyncio
async def test_fewer_than_three_overloads_do_not_switch(openai_server):
    openai_server.script(Turn.fail(429), Turn.fail(429), Turn.say("ok"))
    client = make_client(openai_server.url, llm_fallback_model="fallback-model")
    items = await collect(client)
    assert not [i for i in items if isinstance(i, ModelSwitched)]
    assert openai_server.models_requested() == ["gpt-4o-mini"] * 3
    await client.aclose()


@pytest.mark.asyncio
async def test_server_error_is_retried_with_backoff(openai_server):
    openai_server.script(Turn.fail(500), Turn.fail(502, "bad gateway"), Turn.say("recovered"))
    client = make_client(openai_server.url)
    items = await collect(client)
    assert items[-1].text == "recovered"
    assert len(openai_server.chat_requests) == 3
    await client.aclose()


@pytest.mark.asyncio
async def test_retries_are_bounded(openai_server):
    openai_server.script(*[Turn.fail(500, "boom")] * 3)
    client = make_client(openai_server.url, max_retries=2)
    with pytest.raises(LlmError, match="HTTP 500: boom"):
        await collect(client)
    assert len(openai_server.chat_requests) == 3
    await client.aclose()


@pytest.mark.asyncio
async def test_bad_request_is_not_retried(openai_server):
    openai_server.script(Turn.fail(400, "context too long"))
    client = make_client(openai_server.url)
    with pytest.raises(LlmError, match="context too long"):
        await collect(client)
    assert len(openai_server.chat_requests) == 1
    await client.aclose()


@pytest.mark.asyncio
async def test_slow_response_times_out_then_retry_succeeds(openai_server):
    openai_server.script(Turn.say("late", first_delay=60), Turn.say("on time"))
    client = make_client(openai_server.url, llm_timeout_secs=0.3)
    items = await asyncio.wait_for(collect(client), 30)  # waiting for the late answer would take 60 s
    assert items[-1].text == "on time"
    await client.aclose()


@pytest.mark.asyncio
async def test_timeout_every_time_names_the_timeout(openai_server):
    openai_server.script(*[Turn.say("late", first_delay=0.6)] * 2)
    client = make_client(openai_server.url, llm_timeout_secs=0.2, max_retries=1)
    with pytest.raises(LlmError, match="timed out after 0.2 s"):
        await collect(client)
    await client.aclose()


@pytest.mark.asyncio
async def test_malformed_chunk_is_a_clear_error(openai_server):
    openai_server.script(Turn.say("hello", malformed=True))
    client = make_client(openai_server.url)
    with pytest.raises(LlmError, match="Malformed answer|broke after it started"):
        await collect(client)
    await client.aclose()


@pytest.mark.asyncio
async def test_error_mid_stream_is_not_replayed(openai_server):
    openai_server.script(Turn.say("partial text", stream_error="Overloaded"), Turn.say("never used"))
    client = make_client(openai_server.url)
    seen: list[Any] = []
    with pytest.raises(LlmError, match="broke after it started"):
        async for item in client.stream([{"role": "user", "content": "x"}]):
            seen.append(item)
    assert "".join(i.delta for i in seen if isinstance(i, TextChunk)) == "partial text"
    assert openai_server.remaining == 1
    await client.aclose()


@pytest.mark.asyncio
async def test_not_configured_names_the_settings():
    client = LlmClient(AstroConfig(openai_base_url="", openai_api_key=""))
    with pytest.raises(LlmUnavailableError, match="OPENAI_BASE_URL"):
        await collect(client)
    with pytest.raises(LlmUnavailableError, match="OPENAI_BASE_URL"):
        await client.list_models()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.asyncio
async def test_unreachable_endpoint_is_unavailable_with_url():
    url = f"http://127.0.0.1:{_free_port()}/v1"
    client = make_client(url, max_retries=1)
    with pytest.raises(LlmUnavailableError) as info:
        await collect(client)
    assert url in str(info.value) and "OPENAI_BASE_URL" in str(info.value)
    with pytest.raises(LlmUnavailableError):
        await client.list_models()
    await client.aclose()


# A backoff no test could sit out: a refused connection that were retried would hang here.
_NEVER = 3600.0


@pytest.mark.asyncio
async def test_refused_connection_is_reported_at_once_not_retried():
    """Issue 24 item 12: a closed port fails the first attempt with the reason, with no backoff sleep
    (the retry delay is an hour, so a single retry would run past the deadline below)."""
    url = f"http://127.0.0.1:{_free_port()}/v1"
    client = make_client(url, max_retries=4)
    client.limits = dataclasses.replace(client.limits, retry_base_delay=_NEVER)
    for what in (lambda: collect(client), client.list_models, lambda: client.embed(["M 31"], "emb")):
        with pytest.raises(LlmUnavailableError) as info:
            await asyncio.wait_for(what(), timeout=60)
        message = str(info.value)
        assert f"Cannot reach the LLM endpoint at {url} (connection refused)" in message, message
    await client.aclose()


@pytest.mark.asyncio
async def test_unknown_host_is_reported_at_once_not_retried():
    url = "http://astro-jupyter-no-such-host.invalid/v1"  # .invalid never resolves (RFC 6761)
    client = make_client(url, max_retries=4)
    client.limits = dataclasses.replace(client.limits, retry_base_delay=_NEVER)
    with pytest.raises(LlmUnavailableError, match="host name does not resolve") as info:
        await asyncio.wait_for(collect(client), timeout=60)
    assert url in str(info.value)
    await client.aclose()


def test_only_a_connection_never_opened_skips_the_retries():
    """Refused / no route / unknown host are final; a reset or a timeout stays transient."""
    import errno

    import httpx2
    import openai

    from astro_jupyter.llm.client import _Failure

    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")

    def raised(inner: BaseException, outer: type[Exception] = httpx2.ConnectError) -> BaseException:
        try:
            try:
                try:
                    raise inner
                except BaseException as exc:
                    raise outer(str(exc)) from exc
            except httpx2.TransportError as exc:
                raise openai.APIConnectionError(request=request) from exc
        except openai.APIConnectionError as exc:
            return exc

    no_route = _Failure(raised(OSError(errno.EHOSTUNREACH, "No route to host")))
    assert no_route.connection and not no_route.transient and no_route.describe() == "no route to host"
    grouped = _Failure(raised(ExceptionGroup("all failed", [ConnectionRefusedError(errno.ECONNREFUSED, "refused")])))
    assert not grouped.transient and grouped.describe() == "connection refused"
    reset = _Failure(raised(ConnectionResetError(errno.ECONNRESET, "reset"), httpx2.ReadError))
    assert reset.connection and reset.transient and reset.unreachable == ""
    timeout = _Failure(raised(TimeoutError(), httpx2.ConnectTimeout))
    assert timeout.transient


@pytest.mark.asyncio
async def test_complete_list_models_and_embed(openai_server):
    openai_server.script(Turn.say("A summary."))
    client = make_client(openai_server.url)
    assert await client.complete([{"role": "user", "content": "summarise"}]) == "A summary."
    assert "fallback-model" in await client.list_models()
    vectors = await client.embed(["M 31", "M 87", "M 31"], "text-embedding-3-small")
    assert len(vectors) == 3 and len(vectors[0]) == openai_server.embedding_dim
    assert vectors[0] == vectors[2] and vectors[0] != vectors[1]
    await client.aclose()


@pytest.mark.asyncio
async def test_model_switch_at_run_time_and_per_call_model(openai_server):
    openai_server.script(Turn.say("a"), Turn.say("b"), Turn.say("c"))
    client = make_client(openai_server.url)
    await collect(client)
    switched = client.switch_model("chain-b", "user picked it")
    assert (switched.from_model, switched.to_model) == ("gpt-4o-mini", "chain-b")
    await collect(client)
    await collect(client, model="explicit-model")
    assert openai_server.models_requested() == ["gpt-4o-mini", "chain-b", "explicit-model"]
    await client.aclose()


@pytest.mark.asyncio
async def test_responder_sees_the_request(openai_server):
    def responder(body: dict[str, Any]) -> Turn:
        return Turn.say(f"you said {body['messages'][-1]['content']}")

    openai_server.respond_with(responder)
    client = make_client(openai_server.url)
    items = await collect(client, [{"role": "user", "content": "ping"}])
    assert items[-1].text == "you said ping"
    await client.aclose()


@pytest.mark.asyncio
async def test_missing_call_ids_are_repaired_consistently(openai_server):
    openai_server.script(Turn.calls_(ScriptedCall("a", {"x": 1}, NO_ID), ScriptedCall("b", {}, NO_ID)))
    client = make_client(openai_server.url)
    items = await collect(client)
    ready = [i for i in items if isinstance(i, ToolCallReady)]
    assert [r.name for r in ready] == ["a", "b"]
    assert all(r.id.startswith("call_") for r in ready) and ready[0].id != ready[1].id
    assert [c.id for c in items[-1].tool_calls] == [r.id for r in ready]
    assert [c["id"] for c in items[-1].message["tool_calls"]] == [r.id for r in ready]
    await client.aclose()


@pytest.mark.asyncio
async def test_connection_dropped_before_first_chunk_is_retried(openai_server):
    openai_server.script(Turn.say("lost", drop_after=0), Turn.say("lost too", drop_after=1), Turn.say("second try"))
    client = make_client(openai_server.url)
    items = await collect(client)
    assert items[-1].text == "second try" and len(openai_server.chat_requests) == 3
    await client.aclose()


@pytest.mark.asyncio
async def test_connection_dropped_mid_stream_is_a_clear_error(openai_server):
    openai_server.script(Turn.say("a fairly long answer", chunk_size=2, drop_after=4), Turn.say("unused"))
    client = make_client(openai_server.url)
    with pytest.raises(LlmError, match="broke after it started"):
        await collect(client)
    assert openai_server.remaining == 1
    await client.aclose()


@pytest.mark.asyncio
async def test_fake_server_non_stream_answers_through_the_real_client(openai_server):
    import openai

    openai_server.script(Turn.call("query_target", {"name": "M 31"}, id="ns1", text="Looking.", reasoning="hm"), Turn.fail(503))
    raw = openai.AsyncOpenAI(base_url=openai_server.url, api_key="k", max_retries=0)
    resp = await raw.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    msg = resp.choices[0].message
    assert msg.content == "Looking." and resp.choices[0].finish_reason == "tool_calls"
    assert msg.tool_calls[0].id == "ns1" and json.loads(msg.tool_calls[0].function.arguments) == {"name": "M 31"}
    assert (msg.model_extra or {}).get("reasoning_content") == "hm"
    with pytest.raises(openai.InternalServerError):
        await raw.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    await raw.close()


# The history and tool definitions travel via ``extra_body`` (commit 4ff280c) with an empty
# ``messages=[]`` placeholder; the SDK merges extra_body over the body, so the endpoint must
# still receive every message and tool verbatim, on retries, after a model switch and in complete().
_HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are an astronomy assistant."},
    {"role": "user", "content": "Where is M 31? (Andromeda, 2.5 Mly — ≈0.77 Mpc)"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "query_target", "arguments": "{\"name\": \"M 31\"}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "RA 00h42m44s Dec +41°16′09″"},
    {"role": "user", "content": "And its distance?"},
]
_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "query_target",
            "description": "Resolve an object name with Sesame.",
            "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        },
    }
]


@pytest.mark.asyncio
async def test_wire_body_carries_full_history_and_tools_on_every_attempt(openai_server):
    openai_server.script(
        Turn.fail(503), Turn.fail(529), Turn.fail(529),  # three overload answers -> fallback model
        Turn.say("About 0.77 Mpc."),
    )
    client = make_client(openai_server.url, llm_fallback_model="fallback-model")
    items = await collect(client, [dict(m) for m in _HISTORY], _TOOLS)
    assert isinstance(items[-1], Completed) and items[-1].text == "About 0.77 Mpc."
    assert openai_server.models_requested() == ["gpt-4o-mini"] * 3 + ["fallback-model"]
    for body in openai_server.chat_requests:
        assert body["messages"] == _HISTORY
        assert body["tools"] == _TOOLS
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    await client.aclose()


@pytest.mark.asyncio
async def test_complete_sends_full_history_and_no_tools_key(openai_server):
    openai_server.script(Turn.say("summary"))
    client = make_client(openai_server.url)
    assert await client.complete([dict(m) for m in _HISTORY]) == "summary"
    body = openai_server.chat_requests[0]
    assert body["messages"] == _HISTORY
    assert "tools" not in body
    await client.aclose()


@pytest.mark.parametrize("body", [
    b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": "' + b"a" * (8 << 20) + b'"}}]}',  # no newline
    b"a" * (8 << 20),  # not even an SSE field
], ids=["8MB-data-line", "8MB-garbage"])
@pytest.mark.asyncio
async def test_one_huge_line_without_a_newline_is_an_error_not_an_empty_answer(openai_server, body):
    """An answer that never completes a single event used to end as an empty, "finished" answer."""
    openai_server.script(Turn(raw_body=body), Turn.say("unused"))
    client = make_client(openai_server.url)
    try:
        with pytest.raises(LlmError, match="ended without") as info:
            await collect(client)
    finally:
        await client.aclose()
    assert "no text, no tool call" in str(info.value) and len(str(info.value)) < 600
