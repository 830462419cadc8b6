"""Cost of the LLM-client boundary checks: shape validation, text cleaning and the overall deadline.

    python benchmarks/bench_llm_stream.py [--chunks 2000] [--repeats 5]

The scripted OpenAI server (tests/fakes/openai_server.py) runs in a separate process and streams
one answer of ``--chunks`` text chunks (plus one tool call). Two readers consume it with the real
``openai`` client:

* bare: ``async for chunk in response`` reading ``chunk.choices[0].delta.content`` (no checks);
* astro-jupyter: ``LlmClient.stream`` (every chunk read as JSON, shape-checked, text cleaned of
  lone surrogates, each wait bounded by the overall deadline), once with ASCII text, once with
  non-ASCII text (the slower cleaning path), once with the deadline off.

Figures are this process's CPU microseconds per chunk (median of the repeats), which stays
meaningful on a loaded machine. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _serve(queue: "mp.Queue[str]", chunks: int, text: str) -> None:
    from tests.fakes.openai_server import FakeOpenAIServer, Turn

    body = text * chunks
    server = FakeOpenAIServer(responder=lambda _req: Turn.call("query_target", {"name": "M 87"}, text=body,
                                                              chunk_size=len(text))).start()
    queue.put(server.url)
    while True:
        time.sleep(3600)


async def _bare(url: str) -> int:
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="k", max_retries=0)
    n = 0
    try:
        response = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        async for chunk in response:
            for choice in chunk.choices or []:
                if choice.delta is not None and choice.delta.content:
                    n += 1
    finally:
        await client.close()
    return n


async def _ours(url: str, deadline: float) -> int:
    from astro_jupyter.config import AstroConfig
    from astro_jupyter.llm.client import LlmClient, LlmLimits

    client = LlmClient(AstroConfig(openai_base_url=url, openai_api_key="k"), limits=LlmLimits(deadline_secs=deadline))
    n = 0
    try:
        async for item in client.stream([{"role": "user", "content": "hi"}]):
            n += item.kind == "text"
    finally:
        await client.aclose()
    return n


def _measure(fn: Any, repeats: int) -> tuple[float, int]:
    cpu: list[float] = []
    n = 0
    for _ in range(repeats):
        start = time.process_time()
        n = asyncio.run(fn())
        cpu.append(time.process_time() - start)
    return statistics.median(cpu), n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    rows = []
    for label, text in (("ascii", "word "), ("non-ascii", "étoile ")):
        queue: "mp.Queue[str]" = ctx.Queue()
        proc = ctx.Process(target=_serve, args=(queue, args.chunks, text), daemon=True)
        proc.start()
        url = queue.get(timeout=30)
        try:
            for name, fn in (("bare openai loop", lambda: _bare(url)),
                             ("LlmClient.stream", lambda: _ours(url, 600.0)),
                             ("LlmClient.stream, deadline off", lambda: _ours(url, 0.0))):
                secs, n = _measure(fn, args.repeats)
                rows.append((label, name, n, secs * 1e6 / max(1, n)))
        finally:
            proc.terminate()
    print(f"{'text':<10} {'reader':<32} {'chunks':>7} {'CPU µs/chunk':>13}")
    for label, name, n, per in rows:
        print(f"{label:<10} {name:<32} {n:>7} {per:>13.1f}")


if __name__ == "__main__":
    main()
