"""While events keep coming, an SSE stream sends one batch per ``SsePacing.batch_secs``; the first event
after a quiet spell goes at once. (Fewer writes and wake-ups per event on a busy server.)"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import httpx2
import pytest

from astro_jupyter.server.sse import SsePacing
from tests.fakes.openai_server import Turn
from tests.server.conftest import Api

TEXT = "".join(f"Line {i} of a long answer. " for i in range(60))  # ~1.5 kB in 3-character deltas
PACE_MS = 150


@pytest.fixture
def astro_overrides(openai_server) -> dict[str, Any]:
    return {"openai_base_url": openai_server.url, "openai_api_key": "test-key"}


@pytest.fixture
def sse_pacing() -> SsePacing:
    return SsePacing(batch_secs=PACE_MS / 1000)


async def _read(url: str, headers: dict[str, str]) -> tuple[list[tuple[float, list[int]]], str]:
    """(arrival time, ids) of every network read that carried events, and the text received."""
    reads: list[tuple[float, list[int]]] = []
    buffer, text = "", []
    async with httpx2.AsyncClient(timeout=30) as client:
        async with client.stream("GET", url, headers=headers) as response:
            async for chunk in response.aiter_text():
                ids = []
                buffer += chunk
                *blocks, buffer = buffer.split("\n\n")
                for block in blocks:
                    fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
                    if "id" in fields:
                        ids.append(int(fields["id"]))
                        data = json.loads(fields["data"])
                        if data["type"] == "text_delta":
                            text.append(data["delta"])
                if ids:
                    reads.append((time.perf_counter(), ids))
    return reads, "".join(text)


async def test_a_fast_stream_goes_out_in_paced_batches_and_a_lone_event_at_once(
    api: Api, openai_server: Any, live_url: Callable[[str], str], jp_auth_header: dict[str, str]
) -> None:
    openai_server.script(Turn.say(TEXT, chunk_size=3, delay=0.004, first_delay=0.8))
    status, started = await api("POST", "astro/api/runs", body={"prompt": "a long answer"})
    assert status == 201
    reads, text = await _read(live_url(f"astro/api/runs/{started['run_id']}/events"), jp_auth_header)
    assert text == TEXT
    ids = [i for _, batch in reads for i in batch]
    assert ids == sorted(set(ids))
    deltas = len(TEXT) // 3
    streaming = reads[-1][0] - reads[0][0]
    # ~500 deltas over ~2 s: without pacing the client reads them one by one
    assert len(reads) <= streaming / (PACE_MS / 1000) + 4, f"{len(reads)} reads in {streaming:.2f} s"
    assert len(reads) < deltas / 5
    # the session event came alone, before the model's first chunk (0.8 s later): sent at once, not held back
    first_time, first_ids = reads[0]
    assert first_ids[0] == 1
    assert reads[1][0] - first_time > 0.5
