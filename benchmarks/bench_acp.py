"""Time to the first token: ``astro-jupyter acp`` (first ``agent_message_chunk``) vs the sidebar path
(``POST astro/api/runs`` then the SSE stream's first ``text_delta``), for the same prompt.

    python benchmarks/bench_acp.py [--rounds 20] [--first-delay-ms 0]

Setup: the scripted OpenAI-compatible server (tests/fakes) in a child process answering every
request with a streamed paragraph; a real ``jupyter server`` subprocess with the astro extension
(``bench_server_load.start_server``) for the sidebar path; an ``astro-jupyter acp`` subprocess
driven by the ``agent-client-protocol`` SDK's client over stdio for the ACP path. Each round starts
a new session on both, alternating which goes first; one warm-up round each is not counted. The
clock starts when the client sends its request (POST / ``session/prompt``) and stops when the
first token reaches it. Target (issue 26): ACP p50 ≤ sidebar p50 + 50 ms. Figures depend on the
machine; not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.fakes; the astro_jupyter measured is the one on PYTHONPATH
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_server_load import AUTH, PARAGRAPH, start_server  # noqa: E402


def _serve_llm(conn: Any, first_delay: float) -> None:
    sys.path.insert(0, str(ROOT))
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - cancelled streams make the fake's threads log resets
    from tests.fakes.openai_server import FakeOpenAIServer, Turn

    server = FakeOpenAIServer(responder=lambda body: Turn(text=PARAGRAPH, chunk_size=4, first_delay=first_delay)).start()
    conn.send(server.url)
    conn.recv()
    server.stop()


class FirstChunk:
    """The ACP client: notes when the first agent_message_chunk of the current prompt arrives."""

    def __init__(self) -> None:
        self.first: asyncio.Future[float] | None = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if update.session_update == "agent_message_chunk" and self.first is not None and not self.first.done():
            self.first.set_result(time.perf_counter())

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the benchmark prompt needs no permission")


async def sidebar_round(client: Any, url: str, prompt: str) -> float:
    t0 = time.perf_counter()
    resp = await client.post(f"{url}/astro/api/runs", headers=AUTH, json={"prompt": prompt})
    resp.raise_for_status()
    run_id = resp.json()["run_id"]
    first = None
    async with client.stream("GET", f"{url}/astro/api/runs/{run_id}/events", headers=AUTH) as response:
        async for line in response.aiter_lines():
            if first is None and line.startswith("data: ") and '"type":"text_delta"' in line:
                first = time.perf_counter()
            elif line.startswith("data: ") and '"type":"done"' in line:
                break
    assert first is not None, "the sidebar stream had no text"
    return (first - t0) * 1000


async def acp_round(conn: Any, client: FirstChunk, cwd: str, prompt: str) -> float:
    from acp import text_block

    session = await conn.new_session(cwd=cwd, mcp_servers=[])
    client.first = asyncio.get_running_loop().create_future()
    t0 = time.perf_counter()
    await conn.prompt(session_id=session.session_id, prompt=[text_block(prompt)])
    return (client.first.result() - t0) * 1000


def summary(label: str, values: list[float]) -> str:
    values = sorted(values)
    p95 = values[max(0, int(round(0.95 * len(values))) - 1)]
    return f"{label:>8} {len(values):>7} {statistics.median(values):>8.1f} {p95:>8.1f} {values[0]:>8.1f} {values[-1]:>8.1f}"


async def main(rounds: int, first_delay: float) -> None:
    import httpx2
    from acp import PROTOCOL_VERSION
    from acp.stdio import spawn_agent_process

    parent, child = mp.Pipe()
    llm = mp.Process(target=_serve_llm, args=(child, first_delay), daemon=True)
    llm.start()
    llm_url = parent.recv()
    with tempfile.TemporaryDirectory(prefix="astro-acp-bench-") as tmp:
        base = Path(tmp)
        proc, url, _log = start_server(base, llm_url, 0, [])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_", "ASTRO_"))}
        env.update({"ASTRO_HOME": str(base / "acp_home"), "ASTRO_PROJECT_ROOT": str(base / "project"),
                    "OPENAI_BASE_URL": llm_url, "OPENAI_API_KEY": "sk-bench", "LLM_MODEL": "bench-model",
                    "HF_HUB_OFFLINE": "1"})
        sidebar: list[float] = []
        via_acp: list[float] = []
        try:
            client = FirstChunk()
            async with spawn_agent_process(client, sys.executable, "-m", "astro_jupyter.cli", "acp", env=env,
                                           cwd=str(base / "project")) as (conn, _agent):
                await conn.initialize(protocol_version=PROTOCOL_VERSION)
                async with httpx2.AsyncClient(timeout=60) as http:
                    for i in range(rounds + 1):
                        prompt = f"Summarise the binary's orbit ({i})."
                        pair = [("sidebar", lambda: sidebar_round(http, url, prompt)),
                                ("acp", lambda: acp_round(conn, client, str(base / "project"), prompt))]
                        for label, run in (pair if i % 2 == 0 else pair[::-1]):
                            ms = await run()
                            if i > 0:  # round 0 warms imports, connections and the database
                                (sidebar if label == "sidebar" else via_acp).append(ms)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            parent.send("stop")
            llm.join(timeout=10)
    print(f"time to the first token (ms), {rounds} rounds, scripted LLM first chunk after {first_delay * 1000:g} ms; "
          f"cpu count {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    print(f"{'path':>8} {'rounds':>7} {'p50':>8} {'p95':>8} {'min':>8} {'max':>8}")
    print(summary("sidebar", sidebar))
    print(summary("acp", via_acp))
    delta = statistics.median(via_acp) - statistics.median(sidebar)
    ratio = statistics.median(via_acp) / statistics.median(sidebar)
    print(f"acp − sidebar p50: {delta:+.1f} ms (target ≤ +50 ms: {'met' if delta <= 50 else 'NOT met'}); "
          f"acp / sidebar p50: {ratio:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--first-delay-ms", type=float, default=0.0, help="the scripted LLM's wait before its first chunk")
    args = ap.parse_args()
    asyncio.run(main(args.rounds, args.first_delay_ms / 1000))
