"""Door: the event record after a crash (issue 11, item 11).

A server killed with SIGKILL mid-run has streamed ids its persister never wrote. After a
restart, ids must not go backwards: the run is closed with an ``error`` and a ``done``
numbered after every id a client can have seen, and a client resuming with any
``Last-Event-ID`` past the stored events still receives the terminal ``done``.

One test kills and restarts a real ``jupyter server`` subprocess; the others build the
equivalent store states and resume through the in-process server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import httpx2
import pytest

from astro_jupyter.app import AstroApp
from tests.fakes.openai_server import Turn
from tests.server.conftest import (  # noqa: F401 - the server fixtures
    Api, api, astro_overrides, astro_service, extra_server_config, jp_server_config, live_url,
)

TOKEN = uuid.uuid4().hex
AUTH = {"Authorization": f"token {TOKEN}"}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``jupyter server`` with the astro extension in a subprocess of its own process group."""

    def __init__(self, home: Path, llm_url: str, log: Path, *extra: str) -> None:
        self.port = _port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_", "ASTRO_", "JUPYTER_"))}
        env.update({"ASTRO_HOME": str(home), "ASTRO_PROJECT_ROOT": str(home.parent), "OPENAI_BASE_URL": llm_url,
                    "OPENAI_API_KEY": "sk-fake", "LLM_MODEL": "scripted", "HF_HUB_OFFLINE": "1",
                    "JUPYTER_CONFIG_DIR": str(home.parent / "jcfg"), "JUPYTER_RUNTIME_DIR": str(home.parent / "jrt")})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root", f"--port={self.port}",
             "--ip=127.0.0.1", "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}",
             f"--ServerApp.root_dir={home.parent}", "--ServerApp.jpserver_extensions={'astro_jupyter': True}", *extra],
            env=env, cwd=home.parent, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                if httpx2.get(f"{self.base}/astro/api/auth/me", headers=AUTH, timeout=2).status_code == 200:
                    return
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, "jupyter server did not start within 60 s"
            time.sleep(0.2)

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def read_sse(base: str, run_id: str, last_event_id: int | None = None, stop_after: int | None = None) -> tuple[int, list[tuple[int, dict[str, Any]]]]:
    """(status, [(id, event)]) of ``GET .../events``, read to the end or ``stop_after`` events."""
    headers = dict(AUTH)
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    events: list[tuple[int, dict[str, Any]]] = []
    with httpx2.Client(timeout=30) as client:
        with client.stream("GET", f"{base}/astro/api/runs/{run_id}/events", headers=headers) as response:
            if response.status_code != 200:
                return response.status_code, events
            ident = None
            for line in response.iter_lines():
                if line.startswith("id: "):
                    ident = int(line[4:])
                elif line.startswith("data: ") and ident is not None:
                    events.append((ident, json.loads(line[6:])))
                    ident = None
                    if events[-1][1]["type"] == "done" or (stop_after is not None and len(events) >= stop_after):
                        break
    return 200, events


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


@pytest.mark.slow
def test_sigkill_mid_run_then_restart(tmp_path: Path, openai_server: Any, servers: list[Server]) -> None:
    home = tmp_path / "astro_home"
    log = tmp_path / "server.log"
    # a slow answer: many text deltas; the events wait 60 s before being written, so at the
    # kill most ids a client saw were never stored; ids are reserved 8 at a time
    openai_server.script(Turn.say("".join(f"w{i} " for i in range(200)), chunk_size=4, delay=0.03))
    tuning = tmp_path / "tuning_config.py"  # internal tuning, no settings: handed in as a Python object
    tuning.write_text("from astro_jupyter.services.container import Tuning\n"
                      "c.ServerApp.tornado_settings = {'astro_tuning': Tuning(event_flush_secs=60, event_id_reserve_block=8)}\n")
    first = Server(home, openai_server.url, log, f"--config={tuning}")
    servers.append(first)
    started = httpx2.post(f"{first.base}/astro/api/runs", headers=AUTH, json={"prompt": "talk slowly"}, timeout=10).json()
    run_id = started["run_id"]
    status, seen = read_sse(first.base, run_id, stop_after=40)
    assert status == 200 and [s for s, _ in seen] == list(range(1, 41))
    last_seen = seen[-1][0]
    first.kill()

    second = Server(home, openai_server.url, log)
    servers.append(second)
    status, resumed = read_sse(second.base, run_id, last_event_id=last_seen)
    assert status == 200, "the client that saw id %d got no done" % last_seen
    assert [e["type"] for _, e in resumed] == ["error", "done"] and resumed[-1][1]["reason"] == "error"
    ids = [s for s, _ in resumed]
    assert ids[0] > last_seen and ids == sorted(ids) and len(set(ids)) == len(ids)
    assert "stopped before it ended" in resumed[0][1]["message"]
    done_id = ids[-1]

    status, replay = read_sse(second.base, run_id, last_event_id=0)  # a fresh client: what was stored, then the end
    assert status == 200 and replay[-2:] == resumed and all(s <= last_seen for s, _ in replay[:-2])
    assert httpx2.get(f"{second.base}/astro/api/runs/{run_id}/events", headers={**AUTH, "Last-Event-ID": str(done_id)}).status_code == 204
    status, past = read_sse(second.base, run_id, last_event_id=done_id + 7)
    assert status == 200 and past == [(done_id + 8, resumed[-1][1])]
    run = httpx2.get(f"{second.base}/astro/api/sessions/{started['session_id']}", headers=AUTH).json()["runs"][0]
    assert run["status"] == "error"


async def test_restart_closes_a_dead_run_after_its_reserved_ids(api: Api, astro_service: AstroApp, sse_reader: Any) -> None:
    """The store as a SIGKILL leaves it: ids reserved to 50, events stored to 10, status 'running',
    no process holding the run. The (re)started service closes it with ids 51 and 52."""
    from astro_jupyter.services.container import ServiceContainer

    before = await ServiceContainer(astro_service.config).start()  # the killed process's store
    try:
        session = await before.sessions.create(title="killed")
        await before.runs.create("run_killed", session.id, prompt="hi", reserve_ids=50)
        await before.runs.append_events("run_killed", [(i, {"type": "text_delta", "delta": f"d{i}", "step": 1})
                                                       for i in range(1, 11)])
    finally:
        await before.close()
    assert not astro_service._started  # the server opens its store on the first request, as after a restart
    for last in (10, 30, 50):
        events = await sse_reader("run_killed", last)
        assert [(s, e["type"]) for s, e in events] == [(51, "error"), (52, "done")], last
    status, _ = await api("GET", "astro/api/runs/run_killed/events", headers={"Last-Event-ID": "52"})
    assert status == 204
    done = events[-1][1]
    assert done["reason"] == "error" and await sse_reader("run_killed", 60) == [(61, done)]


async def test_a_finished_run_without_a_stored_done(api: Api, astro_service: AstroApp, sse_reader: Any) -> None:
    """Finished (e.g. closed by an older version), events stored to 5 but ids reserved to 20:
    the unstored done it gets is 21 for everyone, and a client past it gets one after its id."""
    services = (await astro_service.start()).services
    session = await services.sessions.create(title="old")
    await services.runs.create("run_old", session.id, prompt="hi", reserve_ids=20)
    await services.runs.append_events("run_old", [(i, {"type": "text_delta", "delta": "x", "step": 1}) for i in range(1, 6)])
    await services.runs.finish("run_old", "error")
    assert [s for s, _ in await sse_reader("run_old", 0)] == [1, 2, 3, 4, 5, 21]
    assert [s for s, _ in await sse_reader("run_old", 12)] == [21]
    status, _ = await api("GET", "astro/api/runs/run_old/events", headers={"Last-Event-ID": "21"})
    assert status == 204
    assert [(s, e["type"]) for s, e in await sse_reader("run_old", 40)] == [(41, "done")]


@pytest.fixture
def sse_reader(live_url: Any, jp_auth_header: dict[str, str]) -> Any:  # noqa: F811 - live_url is the server fixture
    async def read(run_id: str, last_event_id: int) -> list[tuple[int, dict[str, Any]]]:
        events: list[tuple[int, dict[str, Any]]] = []
        headers = {**jp_auth_header, "Last-Event-ID": str(last_event_id)}
        async with httpx2.AsyncClient(timeout=30) as client:
            async with client.sse(live_url(f"astro/api/runs/{run_id}/events"), headers=headers) as source:
                assert source.response.status_code == 200, source.response.status_code
                async for message in source:
                    if message.data:
                        events.append((int(message.id), json.loads(message.data)))
        return events

    return read


@pytest.mark.asyncio
async def test_watchers_never_see_an_id_the_store_has_not_reserved(services: Any) -> None:
    """The bus's rule, with reservation writes slower than the stream: every id a watcher
    receives was covered by a committed reservation at that moment."""
    import asyncio

    from astro_jupyter.agent.bus import EventBus
    from astro_jupyter.events import Done, TextDelta
    from astro_jupyter.store.runs import RunRepository

    class SlowReservations(RunRepository):
        committed = 0

        async def reserve_ids(self, run_id: str, upto: int) -> None:
            await asyncio.sleep(0.01)
            await super().reserve_ids(run_id, upto)
            SlowReservations.committed = max(SlowReservations.committed, upto)

    session = await services.sessions.create()
    runs = SlowReservations(services.db)
    await runs.create("run_gate", session.id, reserve_ids=16)
    SlowReservations.committed = 16
    bus = EventBus("run_gate", runs, reserve_block=16, reserved=16)
    seen: list[tuple[int, int]] = []

    async def watch() -> None:
        async for seq, _ in bus.subscribe():
            seen.append((seq, SlowReservations.committed))

    watcher = asyncio.create_task(watch())
    for i in range(300):
        bus.publish(TextDelta(delta=f"d{i}", step=1))
        if i % 50 == 0:
            await asyncio.sleep(0)
    bus.publish(Done(session_id=session.id, run_id="run_gate"))
    await asyncio.wait_for(watcher, 10)
    await bus.aclose()
    assert [s for s, _ in seen] == list(range(1, 302))
    assert all(seq <= committed for seq, committed in seen)
    assert await services.runs.last_event_id("run_gate") >= 301
