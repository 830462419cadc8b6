"""Sidebar runs in the agent host: the cost of starting it, and Jupyter's requests while runs stream.

    python benchmarks/bench_agent_host.py [--runs 8 20] [--window 6] [--rounds 2]

Each round starts a fresh real ``jupyter server`` subprocess (``bench_server_load.start_server``) and the scripted LLM in a child
process (each turn: a streamed paragraph, then ``read_file``, ``grep_files``, ``glob_files``):

* first token: ``POST astro/api/runs`` to the first ``text_delta`` on the run's SSE stream, for the
  server's first run (this includes starting the host) and for a second run (the host is up);
* Jupyter's own ``GET /api/contents`` p50/p95 idle, then with N runs streaming (every run has an SSE
  reader), and the ratio of each p95 to the idle p95 of the same server.

Prints medians over the rounds and the load average next to each row. Figures depend on the machine.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_server_load as load  # noqa: E402 - the shared server/LLM setup

MODES = {"host": []}  # the server always runs the agent in its host (the in-process mode is gone)


async def first_token(url: str, prompt: str) -> float:
    import httpx2

    async with httpx2.AsyncClient(timeout=300) as client:
        t0 = time.perf_counter()
        resp = await client.post(f"{url}/astro/api/runs", headers=load.AUTH, json={"prompt": prompt})
        resp.raise_for_status()
        run_id = resp.json()["run_id"]
        async with client.stream("GET", f"{url}/astro/api/runs/{run_id}/events", headers=load.AUTH) as stream:
            async for line in stream.aiter_lines():
                if line.startswith("data: ") and '"type":"text_delta"' in line:
                    took = time.perf_counter() - t0
                    break
        await client.post(f"{url}/astro/api/runs/{run_id}/cancel", headers=load.AUTH, json={})
    return took


async def probe(url: str, window: float) -> list[float]:
    import httpx2

    out: list[float] = []
    async with httpx2.AsyncClient(timeout=60) as client:
        await client.get(f"{url}/api/contents", headers=load.AUTH)
        end = time.perf_counter() + window
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            resp = await client.get(f"{url}/api/contents", headers=load.AUTH)
            out.append((time.perf_counter() - t0) * 1000)
            assert resp.status_code == 200, resp.text
            await asyncio.sleep(max(0.0, 0.02 - (time.perf_counter() - t0)))
    return sorted(out)


def p95(values: list[float]) -> float:
    return values[max(0, int(round(0.95 * len(values))) - 1)]


async def under_load(url: str, runs: int, window: float) -> list[float]:
    import httpx2

    limits = httpx2.Limits(max_connections=runs + 10, max_keepalive_connections=runs + 10)
    async with httpx2.AsyncClient(timeout=120, limits=limits) as client:
        started = []
        for i in range(runs):
            resp = await client.post(f"{url}/astro/api/runs", headers=load.AUTH, json={"prompt": f"busy run {i}"})
            resp.raise_for_status()
            started.append(resp.json())
        counts = [0]
        readers = [asyncio.create_task(load._reader(client, url, s["run_id"], counts)) for s in started]
        await asyncio.sleep(1.0)
        latencies = await probe(url, window)
        for s in started:
            await client.post(f"{url}/astro/api/runs/{s['run_id']}/cancel", headers=load.AUTH, json={})
        await asyncio.wait_for(asyncio.gather(*readers, return_exceptions=True), 120)
    return latencies


async def one_mode(mode: str, llm_url: str, cases: list[int], window: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="astro-host-bench-") as tmp:
        proc, url, _log = load.start_server(Path(tmp), llm_url, 0.0, MODES[mode])
        try:
            row: dict[str, Any] = {"first": await first_token(url, "first"), "second": await first_token(url, "second")}
            idle = await probe(url, window / 2)
            row["idle"] = (statistics.median(idle), p95(idle))
            for n in cases:
                lat = await under_load(url, n, window)
                row[n] = (statistics.median(lat), p95(lat))
            row["load"] = os.getloadavg()[0]
            return row
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


async def main(cases: list[int], window: float, rounds: int, chunk_delay: float) -> None:
    parent, child = mp.Pipe()
    llm = mp.Process(target=load._serve_llm, args=(child, chunk_delay), daemon=True)
    llm.start()
    llm_url = parent.recv()
    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    try:
        for r in range(rounds):
            order = list(MODES) if r % 2 == 0 else list(reversed(MODES))
            for mode in order:
                row = await one_mode(mode, llm_url, cases, window)
                rows[mode].append(row)
                print(f"round {r + 1} {mode:>10}: first token {row['first'] * 1000:.0f} ms (second run "
                      f"{row['second'] * 1000:.0f} ms); /api/contents p95 idle {row['idle'][1]:.1f} ms, "
                      + ", ".join(f"{n} runs {row[n][1]:.1f} ms" for n in cases) + f"; load {row['load']:.1f}", flush=True)
    finally:
        parent.send("stop")
        llm.join(timeout=10)

    def med(mode: str, key: Any, i: int | None = None) -> float:
        return statistics.median(r[key] if i is None else r[key][i] for r in rows[mode])

    print(f"\nmedians over {rounds} round(s); cpu count {os.cpu_count()}, load average now {os.getloadavg()[0]:.1f}")
    print(f"{'':>12} {'1st token':>10} {'2nd token':>10} {'idle p95':>9} " + " ".join(f"{str(n) + ' runs p95':>13} {'ratio':>6}" for n in cases))
    for mode in MODES:
        idle = med(mode, "idle", 1)
        cells = " ".join(f"{med(mode, n, 1):>13.1f} {med(mode, n, 1) / idle:>6.2f}" for n in cases)
        print(f"{mode:>12} {med(mode, 'first') * 1000:>8.0f}ms {med(mode, 'second') * 1000:>8.0f}ms {idle:>9.1f} {cells}")
    extra = med("host", "first") - med("host", "second")
    print(f"the host's start, first run's first token over the second's: {extra:+.2f} s (target <= +0.5 s)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[8, 20])
    ap.add_argument("--window", type=float, default=6.0, help="seconds of probing per case")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--chunk-delay", type=float, default=0.012, help="seconds between the scripted LLM's chunks")
    args = ap.parse_args()
    asyncio.run(main(args.runs, args.window, args.rounds, args.chunk_delay))
