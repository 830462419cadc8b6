"""What a local model's server sends, through the real openai client (tests/fakes/openai_server.py
speaks each server's wire shapes): the model's profile, the output bound on every request, a cut-off
answer, context-length errors, fragments repeating id and name, no usage chunk, progress while a
call is written."""

from __future__ import annotations

from typing import Any

import pytest

from astro_jupyter.config import AstroConfig
from astro_jupyter.llm import Completed, LlmClient, TextChunk, ToolCallReady
from astro_jupyter.llm.client import ContextOverflowError, LlmLimits
from astro_jupyter.llm.profile import known_window, window_from_error
from astro_jupyter.llm.types import ToolCallPreparing
from tests.fakes.openai_server import FakeOpenAIServer, ScriptedCall, Turn


def make_client(url: str, max_tokens: int = 0, **kw: Any) -> LlmClient:
    return LlmClient(AstroConfig(openai_base_url=url, openai_api_key="k", **kw),
                     limits=LlmLimits(retry_base_delay=0.01, max_tokens=max_tokens))


async def collect(client: LlmClient, tools: Any = None, **kw: Any) -> list[Any]:
    return [item async for item in client.stream([{"role": "user", "content": "hi"}], tools, **kw)]


@pytest.mark.asyncio
async def test_a_model_that_never_stops_is_bounded_and_the_cut_is_reported(openai_server: FakeOpenAIServer):
    openai_server.props = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}  # llama.cpp
    openai_server.script(Turn(endless=True, chunk_size=1))
    client = make_client(openai_server.url)
    items = await collect(client)
    await client.aclose()
    sent = openai_server.chat_requests[0]
    assert sent["max_tokens"] == 1024  # a quarter of the 4,096-token window
    final = items[-1]
    assert isinstance(final, Completed) and final.finish_reason == "length" and final.max_tokens == 1024
    assert sum(isinstance(i, TextChunk) for i in items) == 1024


@pytest.mark.asyncio
@pytest.mark.parametrize("server, expected", [
    ("llamacpp", (8192, "llama.cpp /props n_ctx")),
    ("vllm", (16384, "vLLM /v1/models max_model_len")),
    ("ollama-num-ctx", (6000, "Ollama /api/show num_ctx")),
    ("ollama-default", (4096, "Ollama /api/show: trained for 131072")),
    ("table", (131072, "table of well-known models")),
    ("unknown", (32768, "default")),
])
async def test_the_context_window_comes_from_where_the_endpoint_says_it(openai_server, server, expected):
    model = "gpt-4o-mini"
    if server == "llamacpp":
        openai_server.props = {"default_generation_settings": {"n_ctx": 8192, "params": {}}, "total_slots": 1}
    elif server == "vllm":
        openai_server.model_extra = {model: {"max_model_len": 16384, "root": "/models/x"}}
    elif server == "ollama-num-ctx":
        openai_server.ollama_show = {"parameters": "stop \"<end>\"\nnum_ctx 6000", "model_info": {"gemma3.context_length": 131072}}
    elif server == "ollama-default":
        openai_server.ollama_show = {"parameters": "", "model_info": {"general.architecture": "llama", "llama.context_length": 131072}}
    elif server == "table":
        model = "llama3.1:8b"
    else:
        model = "my-own-finetune"
    client = make_client(openai_server.url, llm_model=model)
    profile = await client.profile()
    await client.aclose()
    assert profile.context_window == expected[0] and profile.source.startswith(expected[1])
    assert profile.max_output_tokens == min(8192, expected[0] // 4)


@pytest.mark.asyncio
async def test_the_settings_override_the_endpoint(openai_server):
    openai_server.props = {"default_generation_settings": {"n_ctx": 8192}}
    openai_server.script(Turn.say("ok"))
    client = make_client(openai_server.url, llm_context_window=2048, max_tokens=300)
    await collect(client)
    profile = await client.profile()
    await client.aclose()
    assert (profile.context_window, profile.max_output_tokens, profile.source) == (2048, 300, "setting llm_context_window")
    assert openai_server.chat_requests[0]["max_tokens"] == 300
    assert not any(r.path.endswith(("/props", "/api/show")) for r in openai_server.requests)  # nothing asked


@pytest.mark.asyncio
async def test_a_cut_inside_a_tool_calls_arguments_marks_that_call(openai_server):
    openai_server.script(Turn.calls_(ScriptedCall("query_target", {"name": "M 31"}),
                                     ScriptedCall("save_note", '{"title": "Andromeda", "body": "The galaxy is at a dist'),
                                     finish_reason="length"))
    client = make_client(openai_server.url)
    items = await collect(client)
    await client.aclose()
    ready = [i for i in items if isinstance(i, ToolCallReady)]
    assert [(c.name, c.cut_off) for c in ready] == [("query_target", False), ("save_note", True)]
    final = items[-1]
    assert final.finish_reason == "length" and [c.cut_off for c in final.tool_calls] == [False, True]


@pytest.mark.asyncio
async def test_fragments_repeating_id_and_name_and_no_usage_chunk(openai_server):
    long_args = {"name": "NGC 1275", "note": "x" * 300}
    openai_server.script(Turn.calls_(ScriptedCall("query_target", long_args, id="abcdefghijklmnopqrstuvwxyz012345"),
                                     ScriptedCall("query_target", {"name": "M 87"}, id="ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"),
                                     repeat_call_header=True, no_usage=True, chunk_size=7))
    client = make_client(openai_server.url)
    items = await collect(client)
    await client.aclose()
    ready = [i for i in items if isinstance(i, ToolCallReady)]
    assert [(c.id, c.name) for c in ready] == [("abcdefghijklmnopqrstuvwxyz012345", "query_target"),
                                                ("ABCDEFGHIJKLMNOPQRSTUVWXYZ012345", "query_target")]
    import json

    assert json.loads(ready[0].arguments_json) == long_args and json.loads(ready[1].arguments_json) == {"name": "M 87"}
    final = items[-1]
    assert isinstance(final, Completed) and final.usage == {} and final.finish_reason == "tool_calls"
    # the call being written was announced with its name before it was complete
    preparing = [i for i in items if isinstance(i, ToolCallPreparing)]
    assert preparing and preparing[0].name == "query_target" and items.index(preparing[0]) < items.index(ready[0])


@pytest.mark.asyncio
@pytest.mark.parametrize("style", ["llamacpp", "vllm", "openai"])
async def test_a_context_length_error_is_an_overflow_that_teaches_the_window(openai_server, style):
    openai_server.n_ctx, openai_server.overflow_style = 100, style
    client = make_client(openai_server.url, llm_model="my-own-finetune")
    with pytest.raises(ContextOverflowError) as caught:
        async for _ in client.stream([{"role": "user", "content": "a long question " * 50}]):
            pass
    assert caught.value.window == 100
    assert "does not fit model 'my-own-finetune'" in str(caught.value)
    assert len(openai_server.chat_requests) == 1  # not retried: the same prompt cannot fit
    profile = await client.profile()
    await client.aclose()
    assert profile.context_window == 100 and profile.source == "the endpoint's context-length error"


@pytest.mark.asyncio
async def test_an_endpoint_refusing_max_tokens_gets_max_completion_tokens(openai_server):
    def refuse(body: dict[str, Any]) -> Turn:
        if "max_tokens" in body:
            return Turn.fail(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                  "Use 'max_completion_tokens' instead.")
        return Turn.say("ok")

    openai_server.respond_with(refuse)
    client = make_client(openai_server.url)
    items = await collect(client)
    await client.aclose()
    assert items[-1].text == "ok"
    assert ["max_tokens" in r for r in openai_server.chat_requests] == [True, False]
    assert openai_server.chat_requests[1]["max_completion_tokens"] > 0


def test_profile_tables() -> None:
    assert known_window("meta-llama/Llama-3.1-8B-Instruct".lower()) == 131072
    assert known_window("gemma2:2b") == 8192 and known_window("something-else") is None
    assert window_from_error("This model's maximum context length is 4096 tokens. However, ...") == 4096
    assert window_from_error("the request exceeds the available context size (n_ctx=2048)") == 2048
