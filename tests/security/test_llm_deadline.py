"""Door 9: an overall per-request deadline for LLM calls, counted as a transient error.

The scripted server sends SSE keep-alive comments: every read returns within the per-read
timeout, so only an overall deadline can end the request. Each test is itself bounded so a
regression fails in seconds instead of hanging for the 30 s the server would keep talking.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from astro_jupyter.config import AstroConfig
from astro_jupyter.errors import LlmError
from astro_jupyter.llm.client import LlmClient, LlmLimits
from astro_jupyter.llm.types import Completed, TextChunk
from tests.agent.runtime_helpers import collect, fast, make_config, make_runtime, wires
from tests.fakes.openai_server import Turn

STALL = dict(keepalive_secs=30.0, keepalive_interval=0.1)
GUARD = 15.0  # seconds a test may take at most (the stall alone would last 30 s)


def _config(tmp_path: Path, url: str, **kw: Any) -> AstroConfig:
    return make_config(tmp_path, url, **{"llm_timeout_secs": 3.0, **kw})  # reads never wait 3 s: comments flow


def _limits(**kw: Any) -> LlmLimits:
    """A 1 s overall deadline, one retry (internal tuning, passed to the client)."""
    return LlmLimits(**{"retry_base_delay": 0.01, "deadline_secs": 1.0, "max_retries": 1, **kw})


async def _drain(client: LlmClient) -> list[Any]:
    return [item async for item in client.stream([{"role": "user", "content": "hi"}])]


@pytest.mark.asyncio
async def test_keepalive_stall_hits_the_deadline_after_retries(tmp_path: Path, openai_server: Any) -> None:
    openai_server.script(Turn.say("never", **STALL), Turn.say("never", **STALL))
    client = LlmClient(_config(tmp_path, openai_server.url), limits=_limits())
    started = time.monotonic()
    try:
        with pytest.raises(LlmError) as info:
            await asyncio.wait_for(_drain(client), GUARD)
    finally:
        await client.aclose()
    elapsed = time.monotonic() - started
    assert "overall deadline of 1 s" in str(info.value)
    assert len(openai_server.chat_requests) == 2  # transient: retried once (max_retries=1)
    assert 2.0 <= elapsed < 6.0, elapsed


@pytest.mark.asyncio
async def test_deadline_is_retried_like_any_transient_error(tmp_path: Path, openai_server: Any) -> None:
    openai_server.script(Turn.say("never", **STALL), Turn.say("second try works"))
    client = LlmClient(_config(tmp_path, openai_server.url), limits=_limits())
    try:
        items = await asyncio.wait_for(_drain(client), GUARD)
    finally:
        await client.aclose()
    assert isinstance(items[-1], Completed) and items[-1].text == "second try works"
    assert len(openai_server.chat_requests) == 2


@pytest.mark.asyncio
async def test_stall_after_the_stream_started_is_a_clean_error(tmp_path: Path, openai_server: Any) -> None:
    openai_server.script(Turn.say("hello there", chunk_size=2, keepalive_after=3, **STALL))
    client = LlmClient(_config(tmp_path, openai_server.url), limits=_limits())
    seen: list[str] = []
    try:
        with pytest.raises(LlmError) as info:
            async def read() -> None:
                async for item in client.stream([{"role": "user", "content": "hi"}]):
                    if isinstance(item, TextChunk):
                        seen.append(item.delta)
            await asyncio.wait_for(read(), GUARD)
    finally:
        await client.aclose()
    assert "broke after it started" in str(info.value) and "overall deadline of 1 s" in str(info.value)
    assert "".join(seen) == "hell"  # what arrived was shown; nothing is replayed
    assert len(openai_server.chat_requests) == 1


@pytest.mark.asyncio
async def test_run_with_a_stalling_model_ends_with_an_error_event(tmp_path: Path, openai_server: Any) -> None:
    openai_server.script(Turn.say("never", **STALL), Turn.say("never", **STALL))
    services, runtime = await make_runtime(_config(tmp_path, openai_server.url),
                                           tuning=fast(llm=dataclasses.asdict(_limits(deadline_secs=0.8))))
    started = time.monotonic()
    try:
        handle = await runtime.start_run("hello")
        events = wires(await asyncio.wait_for(collect(handle), GUARD))
        await handle.wait()
    finally:
        await runtime.close()
        await services.close()
    assert time.monotonic() - started < 6.0
    errors = [e for e in events if e["type"] == "error"]
    assert len(errors) == 1 and errors[0]["reason"] == "llm" and "overall deadline of 0.8 s" in errors[0]["message"]
    assert events[-1] == {"type": "done", "session_id": handle.session_id, "run_id": handle.run_id, "reason": "error"}


@pytest.mark.asyncio
async def test_quick_answers_are_untouched_and_zero_disables(tmp_path: Path, openai_server: Any) -> None:
    openai_server.script(Turn.say("fast", delay=0.05), Turn.say("slow but steady", delay=0.15, chunk_size=3))
    quick = LlmClient(_config(tmp_path, openai_server.url), limits=_limits())  # deadline 1 s
    unlimited = LlmClient(_config(tmp_path, openai_server.url, llm_timeout_secs=0.5), limits=_limits(deadline_secs=0.0))
    try:
        first = await asyncio.wait_for(_drain(quick), GUARD)
        started = time.monotonic()
        second = await asyncio.wait_for(_drain(unlimited), GUARD)  # ~9 sends x 0.15 s > 1 s; each read < 0.5 s
        took = time.monotonic() - started
    finally:
        await quick.aclose()
        await unlimited.aclose()
    assert first[-1].text == "fast" and second[-1].text == "slow but steady" and took > 1.0


@pytest.mark.asyncio
async def test_one_shot_calls_have_the_same_deadline(tmp_path: Path, openai_server: Any) -> None:
    """Embeddings: a slow answer (within the per-read timeout) still ends at the overall deadline, retried once."""
    openai_server.state["embed_delay"] = 3.0
    client = LlmClient(_config(tmp_path, openai_server.url, llm_timeout_secs=10.0), limits=_limits(deadline_secs=0.5))
    started = time.monotonic()
    try:
        with pytest.raises(LlmError) as info:
            await asyncio.wait_for(client.embed(["a"], "emb"), GUARD)
        openai_server.state["embed_delay"] = 0.0
        assert len(await asyncio.wait_for(client.embed(["a", "b"], "emb"), GUARD)) == 2
    finally:
        await client.aclose()
    assert "overall deadline of 0.5 s" in str(info.value)
    assert sum(r.path.endswith("/embeddings") for r in openai_server.requests) == 3  # 1 + 1 retry, then the quick one
    assert time.monotonic() - started < 6.0

