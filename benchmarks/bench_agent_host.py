"""Jupyter beside the agent host: is the server still Jupyter while runs stream, and what does the host's start cost?

    python benchmarks/bench_agent_host.py [--runs 8 20] [--cli 2] [--window 6] [--rounds 2] [--panel-delay 1]
        [--readers apart|same] [--cold-against PYTHONPATH] [--cold-only] [--no-floor]

The astro_jupyter measured is the one on PYTHONPATH (the server, its agent host and the CLI processes
inherit it): run it with ``PYTHONPATH=/path/to/other/checkout`` for a before/after pair, alternated.

Each round starts real ``jupyter server`` subprocesses (``bench_server_load.start_server``, ready when
``/api/status`` answers: no astro request before the measured one) and uses the scripted LLM in a child
process (each turn: a streamed paragraph, then ``read_file``, ``grep_files``, ``glob_files``):

* first token, cold: the prompt is the server's first astro request; ``POST astro/api/runs`` to the first
  ``text_delta`` on the run's SSE stream. Then a second run on the same server (the host is up): the
  in-process figure, what a run costs once nothing is left to start. ``--cold-against`` also starts
  servers running another checkout, alternated with this one: with a worktree of the in-process design
  (``bca4b3e^``, the last commit whose server ran the agent in its own interpreter; it needs aiosqlite
  on the path), the cold first token of the design the host replaced, which had its own start to pay.
* first token, sidebar: a second fresh server; the panel's first requests (``astro/api/models`` and
  ``astro/api/sessions``, together) first, the prompt ``--panel-delay`` seconds later; measured from the
  POST and from the panel's first request.
* on that server, idle; then the machine's floor: the ``openai`` client alone, in a process of its own niced
  as the agent host is (``HOST_NICE_INCREMENT``), reading as many streams of the same scripted LLM as the
  largest ``--runs`` case, the way the host opens them (``open_chat_stream``), and nothing else: no agent,
  no store, no SSE, no server work. Its ratio is what any design built on the ``openai`` client costs
  Jupyter here before it does anything (on this 2-core VM even a niced busy process lifts the server's
  p95); ``--no-floor`` skips it. Then with each N of ``--runs`` streaming (every run has an SSE reader), then the
  last N again with ``--cli`` ``astro-jupyter ask`` processes (in-process runtime) running against the same
  ASTRO_HOME and LLM: p95 of Jupyter's own ``GET /api/contents``, of an ``execute_request`` round trip
  through the server's kernel websocket (``/api/kernels/<id>/channels``, a real ipykernel), of
  ``GET astro/api/sessions``; the ratio of each to its idle p95; the RSS of the server and of the agent
  host; the CPU cores the server and the host used; the events/s the SSE readers received. The readers run
  in a process of their own (``--readers apart``, as a browser's tabs do), so that the prober's requests wait
  for the server only, not for its own event loop parsing the streams (``--readers same``).

The kernel figure has a floor of its own: on this 2-core machine a ``1 + 1`` execute answers in ~15 ms
through ``jupyter_client`` directly and ~53 ms through the server's websocket, idle (the server writes
each reply as its own small frame; what JupyterLab sees too). Its ratio is therefore the least sensitive.

Prints every round, then medians over the rounds, with the load average next to each figure. The
machine's other work moves every absolute figure: compare only figures taken back to back.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_server_load as load  # noqa: E402 - the shared server/LLM setup

PROBE_GAP_SECS = 0.01  # between two probes: the prober samples, it does not load the server
KERNEL_CODE = "1 + 1"  # the cheapest execute: the round trip is the server's websocket path, not the kernel


# -- first token ----------------------------------------------------------------------------------------
async def first_token(client: Any, url: str, prompt: str) -> float:
    """Seconds from ``POST astro/api/runs`` to the run's first ``text_delta`` on its SSE stream."""
    t0 = time.perf_counter()
    resp = await client.post(f"{url}/astro/api/runs", headers=load.AUTH, json={"prompt": prompt})
    resp.raise_for_status()
    run_id = resp.json()["run_id"]
    took = float("nan")
    async with client.stream("GET", f"{url}/astro/api/runs/{run_id}/events", headers=load.AUTH) as stream:
        async for line in stream.aiter_lines():
            if line.startswith("data: ") and '"type":"text_delta"' in line:
                took = time.perf_counter() - t0
                break
    await client.post(f"{url}/astro/api/runs/{run_id}/cancel", headers=load.AUTH, json={})
    return took


async def cold_first_tokens(llm_url: str, pythonpath: str | None = None) -> dict[str, float]:
    """A fresh server whose first astro request is the prompt; then a second run (host up, nothing to start).
    ``pythonpath``: a server running another checkout (``--cold-against``)."""
    import httpx2

    with tempfile.TemporaryDirectory(prefix="astro-host-bench-") as tmp:
        proc, url, _log = load.start_server(Path(tmp), llm_url, 0.0, [], ready_path="/api/status", pythonpath=pythonpath)
        try:
            async with httpx2.AsyncClient(timeout=300) as client:
                return {"cold": await first_token(client, url, "first"), "warm": await first_token(client, url, "second")}
        finally:
            stop_server(proc)


async def sidebar_first_token(client: Any, url: str, panel_delay: float) -> dict[str, float]:
    """The sidebar opening: its model list and session list together, the prompt ``panel_delay`` later."""
    t0 = time.perf_counter()
    models, sessions = await asyncio.gather(client.get(f"{url}/astro/api/models", headers=load.AUTH),
                                            client.get(f"{url}/astro/api/sessions", headers=load.AUTH))
    panel = time.perf_counter() - t0
    assert sessions.status_code == 200, sessions.text
    await asyncio.sleep(max(0.0, panel_delay - panel))
    posted = time.perf_counter() - t0
    after_post = await first_token(client, url, "first from the sidebar")
    return {"panel_ms": panel * 1000, "models_status": models.status_code, "after_post": after_post,
            "after_panel": posted + after_post}


# -- the probes -----------------------------------------------------------------------------------------
class KernelProbe:
    """A real ipykernel started through the server, driven over its websocket as JupyterLab does."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.kernel_id = ""
        self.session = uuid.uuid4().hex
        self.ws: Any = None

    async def open(self, client: Any) -> "KernelProbe":
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        resp = await client.post(f"{self.url}/api/kernels", headers=load.AUTH, json={"name": "python3"})
        resp.raise_for_status()
        self.kernel_id = resp.json()["id"]
        ws_url = self.url.replace("http://", "ws://") + f"/api/kernels/{self.kernel_id}/channels?session_id={self.session}"
        self.ws = await websocket_connect(HTTPRequest(ws_url, headers=load.AUTH), max_message_size=1 << 26)
        for _ in range(5):  # the kernel's first executes are slow (its own imports): not the server's
            await self.execute()
        return self

    async def execute(self) -> float:
        """Milliseconds from sending ``execute_request`` to reading its ``execute_reply``."""
        msg_id = uuid.uuid4().hex
        msg = {"header": {"msg_id": msg_id, "username": "bench", "session": self.session, "msg_type": "execute_request",
                          "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
               "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
               "content": {"code": KERNEL_CODE, "silent": False, "store_history": False, "user_expressions": {},
                           "allow_stdin": False, "stop_on_error": True}}
        t0 = time.perf_counter()
        await self.ws.write_message(json.dumps(msg))
        while True:
            raw = await asyncio.wait_for(self.ws.read_message(), 60)
            if raw is None:
                raise RuntimeError("the kernel websocket closed")
            reply = json.loads(raw)
            if reply.get("msg_type") == "execute_reply" and reply.get("parent_header", {}).get("msg_id") == msg_id:
                return (time.perf_counter() - t0) * 1000

    async def close(self, client: Any) -> None:
        if self.ws is not None:
            self.ws.close()
        if self.kernel_id:
            await client.delete(f"{self.url}/api/kernels/{self.kernel_id}", headers=load.AUTH)


def host_pid(server_pid: int) -> int | None:
    """The agent host among the server's children (its kernels are children too)."""
    import psutil

    for child in psutil.Process(server_pid).children():
        try:
            if "astro_jupyter.host" in " ".join(child.cmdline()):
                return child.pid
        except psutil.Error:
            continue
    return None


def rss_mb(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return float("nan")


def cpu_secs(pid: int | None) -> float:
    try:
        return load.cpu_secs(pid) if pid is not None else 0.0
    except (OSError, IndexError, ValueError):
        return 0.0


async def probe_window(client: Any, url: str, kernel: KernelProbe, window: float, server_pid: int) -> dict[str, Any]:
    """Contents, kernel execute and sessions in turn for ``window`` seconds; RSS sampled as it goes."""
    found: dict[str, list[float]] = {"contents": [], "kernel": [], "sessions": []}
    hpid = host_pid(server_pid)
    rss = {"server": 0.0, "host": 0.0, "both": 0.0}
    cpu0 = (cpu_secs(server_pid), cpu_secs(hpid))
    end = time.perf_counter() + window
    next_rss = 0.0
    while time.perf_counter() < end:
        for name, path in (("contents", "/api/contents"), ("kernel", None), ("sessions", "/astro/api/sessions")):
            t0 = time.perf_counter()
            if path is None:
                found[name].append(await kernel.execute())
            else:
                resp = await client.get(f"{url}{path}", headers=load.AUTH)
                found[name].append((time.perf_counter() - t0) * 1000)
                assert resp.status_code == 200, resp.text
            await asyncio.sleep(PROBE_GAP_SECS)
        if time.perf_counter() >= next_rss:
            server, host = rss_mb(server_pid), rss_mb(hpid)
            rss = {"server": max(rss["server"], server), "host": max(rss["host"], host),
                   "both": max(rss["both"], server + (0.0 if host != host else host))}
            next_rss = time.perf_counter() + 1.0
    cpu = ((cpu_secs(server_pid) - cpu0[0]) / window, (cpu_secs(hpid) - cpu0[1]) / window)
    return {**{k: p95(v) for k, v in found.items()}, "n": len(found["contents"]), "rss": rss,
            "server_cpu": cpu[0], "host_cpu": cpu[1]}


def p95(values: list[float]) -> float:
    values = sorted(values)
    return values[max(0, int(round(0.95 * len(values))) - 1)]


# -- the floor: the openai client alone ------------------------------------------------------------------
DROP_BACKOFF_SECS = 0.05


def _bare_openai(llm_url: str, streams: int, chunks: Any, drops: Any, ready: Any, stop: Any) -> None:
    """``streams`` loops of chat-completion streams read to the end, at the agent host's CPU priority."""
    from astro_jupyter.host.process import HOST_NICE_INCREMENT
    from astro_jupyter.llm.client import open_chat_stream

    os.nice(HOST_NICE_INCREMENT)
    import openai

    async def loop(client: Any) -> None:
        while not stop.is_set():
            try:
                response = await open_chat_stream(client, "bench", {"messages": [{"role": "user", "content": "floor"}]})
                async for _chunk in response:
                    chunks.value += 1
            except openai.APIConnectionError:  # a dropped keep-alive connection: the host's client retries these
                drops.value += 1
                await asyncio.sleep(DROP_BACKOFF_SECS)  # as its retries back off: a gone server is not a busy loop

    async def go() -> None:
        client = openai.AsyncOpenAI(base_url=llm_url, api_key="bench", max_retries=0)
        tasks = [asyncio.create_task(loop(client)) for _ in range(streams)]
        ready.set()
        while not stop.is_set() and not any(t.done() for t in tasks):
            await asyncio.sleep(0.1)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(go())


async def floor_window(prober: Any, url: str, kernel: "KernelProbe", window: float, server_pid: int, llm_url: str,
                       streams: int) -> dict[str, Any]:
    """The probes while the bare ``openai`` loop reads ``streams`` streams; its CPU in the host's column."""
    ctx = mp.get_context("spawn")
    chunks, drops, ready, stop = ctx.Value("q", 0), ctx.Value("q", 0), ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_bare_openai, args=(llm_url, streams, chunks, drops, ready, stop), daemon=True)
    proc.start()
    try:
        if not await asyncio.to_thread(ready.wait, 60):
            raise SystemExit("the bare openai loop did not start")
        await asyncio.sleep(1.0)  # every stream flowing
        before, cpu0 = chunks.value, cpu_secs(proc.pid)
        got = await probe_window(prober, url, kernel, window, server_pid)
        got.update(host_cpu=(cpu_secs(proc.pid) - cpu0) / window, events_per_s=0.0, load=os.getloadavg()[0],
                   chunks_per_s=(chunks.value - before) / window, drops=drops.value)
        return got
    finally:
        stop.set()
        await asyncio.to_thread(proc.join, 10)
        if proc.is_alive():
            proc.kill()


# -- the CLI processes ----------------------------------------------------------------------------------
async def start_cli(base: Path, llm_url: str, count: int) -> list[asyncio.subprocess.Process]:
    """``astro-jupyter ask`` processes on the server's library, each streaming (the scripted model calls
    tools every turn, so an ask lasts up to max_steps turns); returns once each streams its first text (its
    start, seconds of imports, is not part of the figure)."""
    exe = Path(sys.executable).parent / "astro-jupyter"
    env = load.bench_env(base, llm_url)
    procs = []
    for i in range(count):
        procs.append(await asyncio.create_subprocess_exec(
            str(exe), "ask", "--json", f"cli question {i}", env=env, cwd=str(base / "project"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, start_new_session=True))
    for proc in procs:
        assert proc.stdout is not None
        while b'"type": "text_delta"' not in (line := await asyncio.wait_for(proc.stdout.readline(), 120)) \
                and b'"type":"text_delta"' not in line:
            if not line:
                raise SystemExit("an astro-jupyter ask process ended before its first text")
        asyncio.get_running_loop().create_task(_drain(proc.stdout))
    return procs


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(1 << 16):
        pass


async def stop_cli(procs: list[asyncio.subprocess.Process]) -> None:
    for proc in procs:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
    for proc in procs:
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()


# -- one server: the sidebar's first token, then idle and the load cases -----------------------------------
def _read_apart(url: str, auth: dict[str, str], run_ids: list[str], count: Any, ready: Any) -> None:
    """The runs' SSE readers in a process of their own (``--readers apart``), as a browser tab's are."""
    import httpx2

    load.AUTH = auth  # the server's token (each process that imports bench_server_load draws its own)

    async def go() -> None:
        limits = httpx2.Limits(max_connections=len(run_ids) + 5, max_keepalive_connections=len(run_ids) + 5)
        async with httpx2.AsyncClient(timeout=300, limits=limits) as client:
            counts = [0]
            tasks = [asyncio.create_task(load._reader(client, url, run_id, counts)) for run_id in run_ids]
            ready.set()
            while not all(t.done() for t in tasks):
                count.value = counts[0]
                await asyncio.sleep(0.1)
            count.value = counts[0]
            failed = [t.exception() for t in tasks if t.exception() is not None]
            if failed:
                print(f"{len(failed)} SSE readers failed: {failed[0]!r}", file=sys.stderr, flush=True)

    asyncio.run(go())


class Readers:
    """Every run's SSE reader, counting the events received: on the prober's own event loop (``same``, how this
    benchmark measured until 2026-12-04) or in a process of their own (``apart``). On the prober's loop, parsing
    ~1,000 events/s of 20 streams delays the prober's own requests, which then measure this process's loop as
    much as the server; a browser's tabs parse their streams in the browser, not in Jupyter's clients."""

    def __init__(self, client: Any, url: str, run_ids: list[str], where: str) -> None:
        self.where = where
        if where == "same":
            self.counts = [0]
            self.tasks = [asyncio.create_task(load._reader(client, url, r, self.counts)) for r in run_ids]
            return
        ctx = mp.get_context("spawn")
        self.value, ready = ctx.Value("q", 0), ctx.Event()
        self.proc = ctx.Process(target=_read_apart, args=(url, load.AUTH, run_ids, self.value, ready), daemon=True)
        self.proc.start()
        if not ready.wait(60):
            raise SystemExit("the SSE readers' process did not start")

    def count(self) -> int:
        return self.counts[0] if self.where == "same" else int(self.value.value)

    async def finish(self) -> None:
        if self.where == "same":
            await asyncio.wait_for(asyncio.gather(*self.tasks, return_exceptions=True), 120)
        else:
            await asyncio.to_thread(self.proc.join, 120)


async def start_runs(client: Any, url: str, runs: int, readers: str) -> tuple[list[dict[str, Any]], Readers]:
    started = []
    for i in range(runs):
        resp = await client.post(f"{url}/astro/api/runs", headers=load.AUTH, json={"prompt": f"busy run {i}"})
        resp.raise_for_status()
        started.append(resp.json())
    return started, Readers(client, url, [s["run_id"] for s in started], readers)


async def stop_runs(client: Any, url: str, started: list[dict[str, Any]], readers: Readers) -> None:
    for s in started:
        await client.post(f"{url}/astro/api/runs/{s['run_id']}/cancel", headers=load.AUTH, json={})
    await readers.finish()


async def loaded_server(llm_url: str, cases: list[int], cli: int, window: float, panel_delay: float,
                        where: str, floor: bool = True) -> dict[str, Any]:
    import httpx2

    with tempfile.TemporaryDirectory(prefix="astro-host-bench-") as tmp:
        base = Path(tmp)
        proc, url, _log = load.start_server(base, llm_url, 0.0, [], ready_path="/api/status")
        limits = httpx2.Limits(max_connections=max(cases) + 20, max_keepalive_connections=max(cases) + 20)
        try:
            async with httpx2.AsyncClient(timeout=300, limits=limits) as client, \
                    httpx2.AsyncClient(timeout=60) as prober:
                row: dict[str, Any] = {"sidebar": await sidebar_first_token(client, url, panel_delay)}
                kernel = await KernelProbe(url).open(prober)
                try:
                    for path in ("/api/contents", "/astro/api/sessions"):
                        await prober.get(f"{url}{path}", headers=load.AUTH)  # connection warm
                    row["idle"] = {**await probe_window(prober, url, kernel, window, proc.pid), "load": os.getloadavg()[0]}
                    if floor:
                        row[FLOOR] = await floor_window(prober, url, kernel, window, proc.pid, llm_url, max(cases))
                    labels = [(n, 0) for n in cases] + ([(cases[-1], cli)] if cli else [])
                    for n, writers in labels:
                        clis = await start_cli(base, llm_url, writers) if writers else []
                        try:
                            started, readers = await start_runs(client, url, n, where)
                            await asyncio.sleep(1.0)  # every run reaches its stream
                            before = readers.count()
                            got = await probe_window(prober, url, kernel, window, proc.pid)
                            got["events_per_s"] = (readers.count() - before) / window
                            got["load"] = os.getloadavg()[0]
                            await stop_runs(client, url, started, readers)
                        finally:
                            await stop_cli(clis)
                        row[label(n, writers)] = got
                finally:
                    await kernel.close(prober)
            return row
        finally:
            stop_server(proc)


FLOOR = "openai alone"


def label(runs: int, cli: int) -> str:
    return f"{runs} runs" + (f" +{cli} CLI" if cli else "")


def stop_server(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


# -- report ---------------------------------------------------------------------------------------------
METRICS = (("contents", "GET /api/contents p95 ms"), ("kernel", "kernel execute_request p95 ms"),
           ("sessions", "GET astro/api/sessions p95 ms"))


def table(rows: list[dict[str, Any]], columns: list[str]) -> list[str]:
    def med(col: str, *path: str) -> float:
        values = []
        for row in rows:
            value: Any = row[col]
            for key in path:
                value = value[key]
            values.append(float(value))
        return statistics.median(values)

    out = [f"{'':>32}" + "".join(f"{c:>18}" for c in columns)]
    for key, title in METRICS:
        idle = med("idle", key)
        cells = [f"{med(c, key):>9.1f}" + (f" ({med(c, key) / idle:4.2f}x)" if c != "idle" else " " * 8) for c in columns]
        out.append(f"{title:>32}" + "".join(f"{c:>18}" for c in cells))
    for key, title in (("server", "server RSS MB"), ("host", "host RSS MB"), ("both", "server + host RSS MB")):
        out.append(f"{title:>32}" + "".join(f"{med(c, 'rss', key):>18.0f}" for c in columns))
    out.append(f"{'server CPU (cores)':>32}" + "".join(f"{med(c, 'server_cpu'):>18.2f}" for c in columns))
    out.append(f"{'host (or bare loop) CPU (cores)':>32}" + "".join(f"{med(c, 'host_cpu'):>18.2f}" for c in columns))
    out.append(f"{'SSE events/s':>32}" + "".join(f"{(med(c, 'events_per_s') if c != 'idle' else 0):>18.0f}" for c in columns))
    if FLOOR in columns:
        out.append(f"{'bare loop: LLM chunks/s':>32}" + "".join(
            f"{(med(c, 'chunks_per_s') if c == FLOOR else 0):>18.0f}" for c in columns))
        out.append(f"{'bare loop: dropped connections':>32}" + "".join(
            f"{(med(c, 'drops') if c == FLOOR else 0):>18.0f}" for c in columns))
    out.append(f"{'probes per kind':>32}" + "".join(f"{med(c, 'n'):>18.0f}" for c in columns))
    out.append(f"{'load average (1 min)':>32}" + "".join(f"{med(c, 'load'):>18.1f}" for c in columns))
    return out


async def main(cases: list[int], cli: int, window: float, rounds: int, chunk_delay: float, panel_delay: float,
               where: str, against: str | None = None, cold_only: bool = False, floor: bool = True) -> None:
    parent, child = mp.Pipe()
    llm = mp.Process(target=load._serve_llm, args=(child, chunk_delay), daemon=True)
    llm.start()
    llm_url = parent.recv()
    source = os.environ.get("PYTHONPATH", "(installed package)")
    print(f"astro_jupyter from {source}; cpu count {os.cpu_count()}; SSE readers: {where}", flush=True)
    columns = ["idle"] + ([FLOOR] if floor else []) + [label(n, 0) for n in cases] + ([label(cases[-1], cli)] if cli else [])
    rows: list[dict[str, Any]] = []
    try:
        for r in range(rounds):
            other = None
            if against is not None and r % 2 == 0:  # alternated: neither tree always goes first
                other = await cold_first_tokens(llm_url, against)
            cold = await cold_first_tokens(llm_url)
            if against is not None and r % 2 == 1:
                other = await cold_first_tokens(llm_url, against)
            cold_load = os.getloadavg()[0]
            if other is not None:
                print(f"round {r + 1}: first token cold: this checkout {cold['cold'] * 1000:.0f} ms (then "
                      f"{cold['warm'] * 1000:.0f} ms), {against} {other['cold'] * 1000:.0f} ms (then "
                      f"{other['warm'] * 1000:.0f} ms); load {cold_load:.1f}", flush=True)
            if cold_only:
                rows.append({"cold": cold, "cold_load": cold_load, "against": other})
                continue
            row = await loaded_server(llm_url, cases, cli, window, panel_delay, where, floor)
            row.update(cold=cold, cold_load=cold_load, against=other)
            rows.append(row)
            side = row["sidebar"]
            print(f"\nround {r + 1}: first token cold {cold['cold'] * 1000:.0f} ms, host up {cold['warm'] * 1000:.0f} ms "
                  f"(load {cold_load:.1f}); sidebar {side['after_post'] * 1000:.0f} ms after the prompt "
                  f"(panel's requests {side['panel_ms']:.0f} ms, models {side['models_status']})", flush=True)
            print("\n".join(table([row], columns)), flush=True)
    finally:
        parent.send("stop")
        llm.join(timeout=10)

    def med(*path: str) -> float:
        values = []
        for row in rows:
            value: Any = row
            for key in path:
                value = value[key]
            values.append(float(value))
        return statistics.median(values)

    print(f"\nmedians over {rounds} round(s); load average now {os.getloadavg()[0]:.1f}")
    if not cold_only:
        print("\n".join(table(rows, columns)))
    cold, warm = med("cold", "cold"), med("cold", "warm")
    print(f"first token, cold (the prompt is the server's first astro request): {cold * 1000:.0f} ms; "
          f"with the host up: {warm * 1000:.0f} ms; the host's start costs {cold - warm:+.2f} s (target <= +0.5 s); "
          f"load {med('cold_load'):.1f}")
    if against is not None:
        other = med("against", "cold")
        print(f"first token, cold, {against}: {other * 1000:.0f} ms (then {med('against', 'warm') * 1000:.0f} ms); "
              f"this checkout's cold first token is {cold - other:+.2f} s over it")
    if cold_only:
        return
    side = med("sidebar", "after_post")
    print(f"first token, sidebar (models + sessions first, the prompt {panel_delay:g} s later): {side * 1000:.0f} ms "
          f"after the prompt, {side - warm:+.2f} s over the host-up figure, {med('sidebar', 'after_panel') * 1000:.0f} ms "
          f"after the panel's first request; the panel's requests took {med('sidebar', 'panel_ms'):.0f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[8, 20])
    ap.add_argument("--cli", type=int, default=2, help="astro-jupyter ask processes beside the last case (0: none)")
    ap.add_argument("--window", type=float, default=6.0, help="seconds of probing per case")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--chunk-delay", type=float, default=0.012, help="seconds between the scripted LLM's chunks")
    ap.add_argument("--panel-delay", type=float, default=1.0,
                    help="seconds from the sidebar's first requests to its prompt")
    ap.add_argument("--readers", choices=("apart", "same"), default="apart",
                    help="the runs' SSE readers in a process of their own (as a browser's) or on the prober's event loop")
    ap.add_argument("--cold-against", metavar="PYTHONPATH",
                    help="also the cold first token of servers running another checkout (e.g. the in-process "
                    "design: a worktree of bca4b3e^, with aiosqlite beside it), alternated with this one")
    ap.add_argument("--cold-only", action="store_true", help="only the cold first tokens, no load cases")
    ap.add_argument("--no-floor", action="store_true", help="skip the bare openai loop's case")
    ap.add_argument("--profile-host", metavar="FILE",
                    help="run the agent host under cProfile (ASTRO_HOST_PROFILE) and write its stats to FILE")
    args = ap.parse_args()
    if args.profile_host:
        os.environ["ASTRO_HOST_PROFILE"] = str(Path(args.profile_host).resolve())
    asyncio.run(main(args.runs, args.cli, args.window, args.rounds, args.chunk_delay, args.panel_delay, args.readers,
                     args.cold_against, args.cold_only, not args.no_floor))
