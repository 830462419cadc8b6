"""SSE throughput and added latency through the real ``RunEventsHandler`` on loopback.

A real Jupyter server (this process) runs the ``astro_jupyter`` extension with a synthetic
runtime whose run publishes events on the real ``EventBus`` as fast as it can (throughput)
or at a steady rate (latency). Clients run in a separate process (2 cores: one for the
server, one for the clients) and read the stream over HTTP with a minimal SSE parser.

Latency = client receive time − publish time (``time.monotonic_ns`` is system-wide on
Linux, so the two processes share the clock). The "in-process subscriber" row is the bus
alone, without HTTP: the difference is what the handler + socket add.

    python benchmarks/bench_sse.py [--events 20000] [--rate 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from astro_jupyter.events import Done, SessionStarted, TextDelta

PAD = "x" * 40  # a typical text delta is a few words; with the JSON frame ~120 bytes per event


# -- the synthetic runtime --------------------------------------------------------------------
class _State:
    def __init__(self, run_id: str) -> None:
        self.run_id, self.session_id, self.owner = run_id, "ses_bench", ""


class SyntheticRun:
    def __init__(self, run_id: str) -> None:
        from astro_jupyter.agent.bus import EventBus

        self.state = _State(run_id)
        self.run_id, self.session_id = run_id, "ses_bench"
        self.bus = EventBus(run_id, None)  # no persistence: measure the stream, not SQLite
        self.bus.publish(SessionStarted(session_id="ses_bench", run_id=run_id))

    @property
    def finished(self) -> bool:
        return self.bus.done

    def events(self, after_seq: int = 0) -> Any:
        return self.bus.subscribe(after_seq)

    async def publish(self, n: int, rate: float | None) -> None:
        """``n`` text deltas carrying their publish time, then Done; ``rate`` None = flat out."""
        interval = 1.0 / rate if rate else 0.0
        start = time.perf_counter()
        for i in range(n):
            self.bus.publish(TextDelta(delta=f"{time.monotonic_ns()} {PAD}", step=1))
            if rate:
                delay = start + (i + 1) * interval - time.perf_counter()
                await asyncio.sleep(max(0.0, delay))
            elif i % 64 == 63:
                await asyncio.sleep(0)  # a real run yields between LLM chunks
        self.bus.publish(Done(session_id="ses_bench", run_id=self.run_id))


class SyntheticRuntime:
    def __init__(self, services: Any) -> None:
        self.runs: dict[str, SyntheticRun] = {}
        self.llm = None

    async def start(self) -> None:
        return None

    def get_run(self, run_id: str) -> SyntheticRun | None:
        return self.runs.get(run_id)

    def active_run_for(self, session_id: str) -> None:
        return None

    async def close(self) -> None:
        return None


# -- the client process -----------------------------------------------------------------------
async def _client(url: str, token: str, ready: asyncio.Event, latencies: list[int], counts: list[int], idx: int) -> None:
    import httpx2

    async with httpx2.AsyncClient(timeout=120) as client:
        async with client.stream("GET", url, headers={"Authorization": f"token {token}"}) as response:
            assert response.status_code == 200, response.status_code
            buffer = b""
            async for chunk in response.aiter_bytes():
                buffer += chunk
                now = time.monotonic_ns()
                *blocks, buffer = buffer.split(b"\n\n")
                for block in blocks:
                    if not block.startswith(b"id: "):
                        continue
                    data = block[block.index(b"data: ") + 6:]
                    counts[idx] += 1
                    if b'"text_delta"' in data:
                        start = data.index(b'"delta":"') + 9
                        sent = int(data[start:data.index(b" ", start)])
                        latencies.append(now - sent)
                    elif b'"type":"session"' in data:
                        ready.set()


async def client_main(url: str, token: str, clients: int) -> None:
    readies = [asyncio.Event() for _ in range(clients)]
    per_client: list[list[int]] = [[] for _ in range(clients)]
    counts = [0] * clients
    tasks = [asyncio.create_task(_client(url, token, readies[i], per_client[i], counts, i)) for i in range(clients)]
    await asyncio.gather(*(r.wait() for r in readies))
    print("READY", flush=True)
    t0 = time.perf_counter()
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    lat = sorted(x for lst in per_client for x in lst)
    print(json.dumps({"wall": wall, "events": sum(counts), "latencies_ns": lat[:: max(1, len(lat) // 20000)]}), flush=True)


# -- the server side ------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start_server(home: str) -> tuple[Any, int, str]:
    from jupyter_server.serverapp import ServerApp
    from traitlets.config import Config

    from astro_jupyter.server.base import SERVICE_KEY

    port, token = _free_port(), "bench-token"
    config = Config({
        "ServerApp": {"jpserver_extensions": {"astro_jupyter": True}, "port": port, "ip": "127.0.0.1",
                      "open_browser": False, "allow_root": True, "log_level": "WARN", "root_dir": home},
        "IdentityProvider": {"token": token},
        "AstroConfig": {"home": home},
    })
    app = ServerApp.instance(config=config)
    app.initialize(argv=[])
    service = app.web_app.settings[SERVICE_KEY]
    service._runtime_factory = SyntheticRuntime
    await service.start()
    return app, port, token


async def run_case(app: Any, port: int, token: str, clients: int, events: int, rate: float | None) -> dict[str, Any]:
    from astro_jupyter.server.base import SERVICE_KEY

    runtime = app.web_app.settings[SERVICE_KEY].runtime
    run_id = f"run_bench_{len(runtime.runs)}"
    run = SyntheticRun(run_id)
    runtime.runs[run_id] = run
    url = f"http://127.0.0.1:{port}/astro/api/runs/{run_id}/events"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--client", url, token, str(clients), stdout=asyncio.subprocess.PIPE, limit=1 << 26,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    assert line.strip() == b"READY", line
    t0 = time.perf_counter()
    await run.publish(events, rate)
    publish_secs = time.perf_counter() - t0
    out = json.loads(await asyncio.wait_for(proc.stdout.readline(), 300))
    await proc.wait()
    lat_ms = [x / 1e6 for x in out["latencies_ns"]]
    delivered = out["events"] - clients  # minus each client's replayed session event
    return {
        "clients": clients, "events": events, "rate": rate, "wall": out["wall"], "publish_secs": publish_secs,
        "per_client_eps": events / out["wall"], "aggregate_eps": delivered / out["wall"],
        "p50": statistics.median(lat_ms), "p99": lat_ms[int(len(lat_ms) * 0.99) - 1] if lat_ms else float("nan"),
    }


async def in_process_baseline(events: int, rate: float) -> dict[str, Any]:
    run = SyntheticRun("run_baseline")
    lat: list[float] = []

    async def reader() -> None:
        async for _, ev in run.events(1):
            if isinstance(ev, TextDelta):
                lat.append((time.monotonic_ns() - int(ev.delta.split(" ", 1)[0])) / 1e6)

    task = asyncio.create_task(reader())
    await asyncio.sleep(0)
    await run.publish(events, rate)
    await task
    lat.sort()
    return {"p50": statistics.median(lat), "p99": lat[int(len(lat) * 0.99) - 1], "per_client_eps": 0.0, "aggregate_eps": 0.0}


def _median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(runs[0])
    for key in ("per_client_eps", "aggregate_eps", "p50", "p99"):
        out[key] = statistics.median(r[key] for r in runs)
    return out


async def main(events: int, rate: float, repeat: int) -> None:
    n_lat = int(rate * 5)
    cases = [
        ("throughput, 1 client", 1, events, None),
        ("throughput, 10 clients", 10, events // 4, None),
        (f"latency @ {rate:g} ev/s, 1 client", 1, n_lat, rate),
        (f"latency @ {rate:g} ev/s, 10 clients", 10, n_lat, rate),
    ]
    with tempfile.TemporaryDirectory() as home:
        app, port, token = await start_server(home)
        try:
            rows = []
            for name, clients, n, r in cases:
                rows.append((name, _median_row([await run_case(app, port, token, clients, n, r) for _ in range(repeat)])))
            base = _median_row([await in_process_baseline(n_lat, rate) for _ in range(repeat)])
        finally:
            await app._cleanup()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print()
    print(f"SSE through RunEventsHandler on loopback ({os.cpu_count()} cores, load {load:.1f}; clients in a separate "
          f"process; median of {repeat})")
    print(f"{'case':34} {'events':>7} {'per client ev/s':>16} {'aggregate ev/s':>15} {'p50 ms':>8} {'p99 ms':>8}")
    for name, row in rows:
        print(f"{name:34} {row['events']:>7} {row['per_client_eps']:>16,.0f} {row['aggregate_eps']:>15,.0f}"
              f" {row['p50']:>8.2f} {row['p99']:>8.2f}")
    print(f"{'in-process subscriber (no HTTP)':34} {n_lat:>7} {'':>16} {'':>15} {base['p50']:>8.2f} {base['p99']:>8.2f}")
    print()
    print("latency = client receive time - publish time; in the throughput rows it includes queueing behind the burst")
    print("goal: >= 5,000 events/s to one client; p99 <= 5 ms added latency per event")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        asyncio.run(client_main(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--events", type=int, default=20000)
        parser.add_argument("--rate", type=float, default=1000.0)
        parser.add_argument("--repeat", type=int, default=3)
        ns = parser.parse_args()
        asyncio.run(main(ns.events, ns.rate, ns.repeat))
