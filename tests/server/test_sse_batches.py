"""SSE under load: events go out in batches, and deltas that queued up for a reader that fell
behind (a slow client, a late or resuming one) are merged, without losing a character.

What a client must see either way: every character of the text in order, strictly increasing
ids, the terminal ``done``, and ``Last-Event-ID`` resuming exactly after what it saw.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from astro_jupyter.server.base import SERVICE_KEY
from astro_jupyter.app import AstroApp
from astro_jupyter.server.sse import SsePacing
from tests.fakes.openai_server import Turn
from tests.server.conftest import Api

TEXT = "".join(f"Sentence {i} about the light curve of the eclipsing binary. " for i in range(120))  # ~7 kB
CHUNK = 3
Event = tuple[int, dict[str, Any]]


@pytest.fixture
def astro_overrides(openai_server) -> dict[str, Any]:
    return {"openai_base_url": openai_server.url, "openai_api_key": "test-key"}


@pytest.fixture
def sse_pacing() -> SsePacing:
    return SsePacing(keepalive_secs=0.2)


def _text(events: list[Event]) -> str:
    return "".join(e["delta"] for _, e in events if e["type"] == "text_delta")


def _check_stream(events: list[Event]) -> None:
    ids = [s for s, _ in events]
    assert ids == sorted(set(ids)), "ids must strictly increase"
    assert events[-1][1]["type"] == "done" and events[-1][1]["reason"] == "finished"


async def _finished_run(api: Api, sse: Any, astro_service: AstroApp, openai_server: Any) -> tuple[str, int]:
    """A run that streamed its answer in ~2,400 deltas, finished (its stream read to ``done``), and how many
    delta events its record holds."""
    openai_server.script(Turn.say(TEXT, chunk_size=CHUNK))
    status, started = await api("POST", "astro/api/runs", body={"prompt": "describe the binary"})
    assert status == 201
    run_id = started["run_id"]
    assert (await sse(run_id))[-1][1]["type"] == "done"
    stored = await astro_service.services.runs.events_after(run_id, 0, 100_000)
    return run_id, sum(1 for _, e in stored if e["type"] == "text_delta")


async def test_a_late_reader_gets_merged_deltas_with_every_character_and_resumes(
    api: Api, sse: Any, openai_server: Any, astro_service: AstroApp, jp_serverapp: Any
) -> None:
    run_id, deltas = await _finished_run(api, sse, astro_service, openai_server)
    assert deltas >= len(TEXT) // CHUNK // 2  # ~2,400 small deltas streamed; the record holds most of them apart

    events = await sse(run_id)  # joins after everything was published: far behind
    _check_stream(events)
    assert _text(events) == TEXT
    sent = sum(1 for _, e in events if e["type"] == "text_delta")
    assert sent < deltas // 10, f"{sent} delta events for {deltas} deltas: nothing was merged"
    assert {e["step"] for _, e in events if e["type"] == "text_delta"} == {1}  # same wire shape

    # resuming with any id the client saw gives exactly the rest
    for cut in (1, len(events) // 3, len(events) - 2):
        seen_id = events[cut - 1][0]
        rest = await sse(run_id, last_event_id=seen_id)
        _check_stream(rest)
        assert rest[0][0] > seen_id
        assert _text(events[:cut]) + _text(rest) == TEXT

    # an id inside a merged run (the client of an unmerged stream saw it): the text after it, exactly
    stored = await astro_service.services.runs.events_after(run_id, 0, 100_000)
    middle = stored[len(stored) // 2][0]
    expect = "".join(d["delta"] for s, d in stored if d["type"] == "text_delta" and s > middle)
    assert _text(await sse(run_id, last_event_id=middle)) == expect

    # after a restart the same run replays from the store: merged too, every character
    await astro_service.close()
    fresh = AstroApp(astro_service.config, serve=True)
    jp_serverapp.web_app.settings[SERVICE_KEY] = fresh
    try:
        replay = await sse(run_id)
        _check_stream(replay)
        assert _text(replay) == TEXT and sum(1 for _, e in replay if e["type"] == "text_delta") < deltas // 10
        rest = await sse(run_id, last_event_id=replay[5][0])
        assert _text(replay[:6]) + _text(rest) == TEXT
    finally:
        await fresh.close()


async def _slow_raw_read(port: int, path: str, headers: dict[str, str]) -> bytes:
    """An SSE client that reads 1 kB every 5 ms through a tiny receive window (what a
    phone on a bad network does): the server's writes wait for it."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=1024)
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Accept: text/event-stream",
             *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    writer.write("\r\n".join(lines).encode())
    await writer.drain()
    data = b""
    while not (b'"type":"done"' in data and data.endswith(b"\r\n0\r\n\r\n")):  # done, then the last chunk
        chunk = await asyncio.wait_for(reader.read(1024), 30)
        if not chunk:
            break
        data += chunk
        await asyncio.sleep(0.005)
    writer.close()
    return data


def _parse_sse(raw: bytes) -> list[Event]:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    if b"chunked" in head.lower():  # undo chunked transfer encoding
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2:]
        body = out
    events: list[Event] = []
    for block in body.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "data" in fields and "id" in fields:
            events.append((int(fields["id"]), json.loads(fields["data"])))
    return events


async def test_a_slow_client_of_a_live_run_receives_every_character_in_order(
    api: Api, sse: Any, openai_server: Any, jp_http_port: int, jp_base_url: str, jp_auth_header: dict[str, str]
) -> None:
    openai_server.script(Turn.say(TEXT, chunk_size=CHUNK, delay=0.0005))
    status, started = await api("POST", "astro/api/runs", body={"prompt": "describe the binary"})
    run_id = started["run_id"]
    raw, fast = await asyncio.gather(
        _slow_raw_read(jp_http_port, f"{jp_base_url}astro/api/runs/{run_id}/events", jp_auth_header),
        sse(run_id),
    )
    slow = _parse_sse(raw)
    for events in (slow, fast):
        _check_stream(events)
        assert _text(events) == TEXT
    cut = len(slow) // 2
    rest = await sse(run_id, last_event_id=slow[cut - 1][0])
    assert _text(slow[:cut]) + _text(rest) == TEXT
