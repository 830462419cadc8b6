"""LLM streams read in the I/O process (``llm/io_process.py`` + ``llm/io_worker.py``): this
process does none of the HTTP or chunk parsing, a cancelled run hangs up the endpoint, and a
worker that dies ends its streams with a clear error while the next stream starts a new one.

(``test_client.py`` runs every client behaviour in both modes, and ``test_io_thread.py`` the hang-up
on cancel: retries, overloads, malformed
chunks, timeouts, tool-call assembly.)"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from astro_jupyter.config import AstroConfig
from astro_jupyter.errors import LlmError
from astro_jupyter.llm import Completed, TextChunk, ToolCallReady
from astro_jupyter.llm.client import LlmLimits
from astro_jupyter.llm.io_process import LLM_PROCESS
from tests.fakes.openai_server import ScriptedCall, Turn
from tests.llm.test_client import collect, make_client


@pytest.fixture(autouse=True)
def in_process_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASTRO_LLM_IO", "process")


async def _wait_for(check: Any, secs: float = 10.0) -> None:
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline and not check():
        await asyncio.sleep(0.05)
    assert check()


@pytest.mark.asyncio
async def test_chunks_are_parsed_in_the_worker_not_here(openai_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from astro_jupyter.llm import shape

    parsed_here: list[str] = []
    real = shape.read_chunk
    monkeypatch.setattr("astro_jupyter.llm.client.read_chunk", lambda c: parsed_here.append("x") or real(c))
    openai_server.script(Turn(text="M 87 hosts a jet.", chunk_size=3,
                              calls=[ScriptedCall("query_target", {"name": "M 87"}, "call_1")],
                              usage={"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}))
    client = make_client(openai_server.url)
    assert client.io_mode == "process"
    items = await collect(client)
    assert "".join(i.delta for i in items if isinstance(i, TextChunk)) == "M 87 hosts a jet."
    ready = [i for i in items if isinstance(i, ToolCallReady)]
    assert [(c.id, c.name, c.arguments_json) for c in ready] == [("call_1", "query_target", '{"name": "M 87"}')]
    assert isinstance(items[-1], Completed) and items[-1].usage["total_tokens"] == 19
    assert parsed_here == []  # every chunk was read and checked in the worker
    assert LLM_PROCESS.pid is not None and LLM_PROCESS.pid != os.getpid()
    await client.aclose()


@pytest.mark.asyncio
async def test_a_worker_killed_mid_stream_ends_the_stream_cleanly_and_the_next_starts_a_new_one(openai_server: Any) -> None:
    openai_server.script(Turn.say("y" * 400, chunk_size=1, delay=0.02), Turn.say("Still here.", chunk_size=4))
    client = make_client(openai_server.url, max_retries=0)
    first = asyncio.Event()
    got: list[str] = []

    async def consume() -> None:
        async for item in client.stream([{"role": "user", "content": "hi"}]):
            if isinstance(item, TextChunk):
                got.append(item.delta)
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 20)
    killed = LLM_PROCESS.pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    with pytest.raises(LlmError, match="broke after it started.*LLM I/O process exited"):
        await asyncio.wait_for(task, 10)
    assert got and "".join(got) != "y" * 400

    items = await collect(client)  # a new worker, transparently
    assert "".join(i.delta for i in items if isinstance(i, TextChunk)) == "Still here."
    assert LLM_PROCESS.pid not in (None, killed)
    await client.aclose()


@pytest.mark.asyncio
async def test_a_dead_worker_before_the_request_is_retried_as_a_dropped_connection(openai_server: Any) -> None:
    openai_server.script(Turn.say("warm"))
    client = make_client(openai_server.url)
    await collect(client)
    LLM_PROCESS.stop()  # the worker exits (its stdin closed)
    openai_server.script(Turn.say("Fresh worker."))
    items = await collect(client)
    assert "".join(i.delta for i in items if isinstance(i, TextChunk)) == "Fresh worker."
    await client.aclose()


@pytest.mark.asyncio
async def test_many_streams_at_once_keep_their_own_chunks(openai_server: Any) -> None:
    """Streams share one pipe: each gets exactly its own text, in order."""
    openai_server.respond_with(lambda body: Turn.say(body["messages"][-1]["content"] * 20, chunk_size=3, delay=0.001))
    client = make_client(openai_server.url)

    async def one(i: int) -> str:
        items = await collect(client, [{"role": "user", "content": f"<{i}>"}])
        return "".join(x.delta for x in items if isinstance(x, TextChunk))

    texts = await asyncio.gather(*(one(i) for i in range(12)))
    assert texts == [f"<{i}>" * 20 for i in range(12)]
    await client.aclose()


def test_the_worker_ignores_modules_in_the_servers_working_directory(tmp_path: Path, openai_server: Any) -> None:
    """A notebook folder with a ``json.py`` (the server's working directory) is not imported by the worker."""
    (tmp_path / "json.py").write_text("raise SystemExit('the json.py of the notebook folder was imported')\n")
    openai_server.script(Turn.say("Clean import."))
    code = (  # a process like the server: nothing imported from its working directory, which is the notebook folder
        "import sys, os\n"
        "if sys.path[0] == '':\n"
        "    del sys.path[0]\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "os.chdir(sys.argv[1])\n"
        "import asyncio\n"
        "from tests.llm.test_client import collect, make_client\n"
        "from astro_jupyter.llm import TextChunk\n"
        f"items = asyncio.run(collect(make_client({openai_server.url!r}, max_retries=0)))\n"
        "print(''.join(i.delta for i in items if isinstance(i, TextChunk)))\n"
    )
    env = {**os.environ, "ASTRO_LLM_IO": "process"}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Clean import."


def test_auto_means_thread_outside_the_server() -> None:
    from astro_jupyter.llm import LlmClient

    assert LlmClient(AstroConfig(llm_io="auto")).io_mode == "thread"
    assert LlmClient(AstroConfig(llm_io="process")).io_mode == "process"


def test_unknown_env_value_falls_back_to_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASTRO_LLM_IO", "warp-drive")
    assert AstroConfig().llm_io == "auto"



@pytest.mark.asyncio
async def test_a_request_that_is_not_json_fails_alone(openai_server: Any) -> None:
    """A bug upstream (a non-JSON value in the history) fails that request, not the pipe."""
    client = make_client(openai_server.url, max_retries=0)
    with pytest.raises(LlmError, match="could not be encoded as JSON"):
        await asyncio.wait_for(collect(client, [{"role": "user", "content": b"bytes"}]), 10)
    openai_server.script(Turn.say("Next request fine."))
    items = await asyncio.wait_for(collect(client), 10)
    assert "".join(i.delta for i in items if isinstance(i, TextChunk)) == "Next request fine."
    await client.aclose()


def test_the_worker_exits_when_the_server_is_killed(openai_server: Any) -> None:
    """kill -9 of the server leaves no worker behind: its stdin closes, and it exits."""
    openai_server.script(Turn.say("z" * 2000, chunk_size=1, delay=0.01))
    code = (
        "import asyncio, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from tests.llm.test_client import make_client\n"
        "from astro_jupyter.llm.io_process import LLM_PROCESS\n"
        "async def main():\n"
        f"    async for item in make_client({openai_server.url!r}).stream([{{'role': 'user', 'content': 'hi'}}]):\n"
        "        print(LLM_PROCESS.pid, flush=True)\n"
        "        await asyncio.sleep(60)\n"
        "asyncio.run(main())\n"
    )
    server = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "ASTRO_LLM_IO": "process"},
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        worker = int(server.stdout.readline())
    finally:
        server.kill()
        server.wait()

    def gone() -> bool:
        try:
            state = Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        return state in ("Z", "X")  # exited (a zombie until the container's init reaps it)

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not gone():
        time.sleep(0.05)
    assert gone(), f"the LLM I/O process {worker} outlived the server"


@pytest.mark.asyncio
async def test_a_long_stream_survives_many_other_endpoints(openai_server: Any) -> None:
    """The worker keeps a few clients (one per endpoint and key); a client with a stream open is
    never the one closed to make room."""
    from astro_jupyter.llm import LlmClient

    def client(key: str) -> LlmClient:
        return LlmClient(AstroConfig(openai_base_url=openai_server.url, openai_api_key=key), limits=LlmLimits(max_retries=0))

    openai_server.respond_with(
        lambda body: Turn.say("long " * 60, chunk_size=5, delay=0.02) if body["messages"][-1]["content"] == "long"
        else Turn.say("short"))
    long_one = asyncio.create_task(collect(client("key-long"), [{"role": "user", "content": "long"}]))
    await asyncio.sleep(0.3)
    for i in range(12):
        items = await collect(client(f"key-{i}"))
        assert "".join(x.delta for x in items if isinstance(x, TextChunk)) == "short"
    items = await asyncio.wait_for(long_one, 30)
    assert "".join(x.delta for x in items if isinstance(x, TextChunk)) == "long " * 60


@pytest.mark.asyncio
async def test_the_worker_gathers_chunks_for_llm_io_batch_ms(openai_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a batch window the server takes many tokens per hand-over, and loses none."""
    from astro_jupyter.llm.io_thread import Relay

    handovers: list[int] = []
    real = Relay.add
    monkeypatch.setattr(Relay, "add", lambda self, items: handovers.append(len(items)) or real(self, items))
    openai_server.script(Turn.say("ab" * 60, chunk_size=1, delay=0.01))  # 120 chunks over ~1.2 s
    monkeypatch.setenv("ASTRO_LLM_IO_BATCH_MS", "60")
    client = make_client(openai_server.url)
    items = await collect(client)
    assert "".join(i.delta for i in items if isinstance(i, TextChunk)) == "ab" * 60
    assert sum(handovers) >= 120 and len(handovers) <= 45, handovers
    await client.aclose()
