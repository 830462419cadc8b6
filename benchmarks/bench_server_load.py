"""How fast ``GET astro/api/sessions`` answers while 1, 5 and 20 runs are busy on the same server.

    python benchmarks/bench_server_load.py [--runs 1 5 20] [--window 6] [--writers 0] [--slow-ms 10]

Setup: a real ``jupyter server`` subprocess with the astro extension and the real runtime;
the scripted OpenAI-compatible server (tests/fakes) in a child process, so its threads do
not compete with the measuring process for a GIL. Each run loops for as long as the window
lasts: a streamed paragraph of text deltas, then ``read_file`` of an 80 kB file (persisted to
tool-results/), ``grep_files`` over 60 files and ``glob_files``, then the next turn. Every run
has an SSE reader attached (as the sidebar would). During the window a prober sends one
``GET astro/api/sessions`` every 20 ms and records its latency; the runs are then cancelled.
``--writers K`` adds K processes committing sessions + messages to the same astro.db in a
loop (what CLI / kernel runs do to the shared file).

``--slow-ms`` turns on asyncio debug mode in the server and reports the callbacks that held
its event loop longer than that (from the server log): what to move off the loop.

``--profile`` samples the server with py-spy (``pip install py-spy``) during the last case,
counting only the thread that holds the GIL, and prints where that time went by layer (LLM
stream, SSE, file-tool threads, ...) and the busiest functions: what to make cheaper.

Prints p50 / p95 / max per case, the events/s the SSE readers received, and the server's CPU
(cores busy, and CPU ms per delivered event: the figure that stays comparable on a loaded machine),
the cores its child processes used (the agent host, kernels), and the cores
the whole machine was busy (this script, the scripted LLM and the server share it: near the core
count, latency measures the machine's saturation as much as the server; "steal" is the part a
hypervisor took for other guests: compare figures taken with little of it). Not part of the test suite; figures depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import multiprocessing as mp
import os
import re
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.fakes; the astro_jupyter measured is the one on PYTHONPATH

TOKEN = uuid.uuid4().hex
AUTH = {"Authorization": f"token {TOKEN}"}
PARAGRAPH = ("The radial velocity curve of the binary shows a period of 3.2 days and a semi-amplitude "
             "of 41 km/s; the eclipse depth implies an inclination near 84 degrees. ") * 3


# -- the scripted LLM (child process) -----------------------------------------------------------------
def _serve_llm(conn: Any, chunk_delay: float) -> None:
    sys.path.insert(0, str(ROOT))
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - cancelled streams make the fake's threads log resets
    from tests.fakes.openai_server import FakeOpenAIServer, ScriptedCall, Turn

    def responder(body: dict[str, Any]) -> Turn:
        if body.get("messages", [{}])[-1].get("content") == "cost probe":  # chunk_cost(): flat out, text only
            return Turn(text="x" * 4000, chunk_size=4)
        step = sum(1 for m in body.get("messages", []) if m.get("role") == "tool") // 3
        calls = [
            ScriptedCall("read_file", {"path": "data/big.txt"}, f"r{step}"),
            ScriptedCall("grep_files", {"pattern": f"line {step % 50}\\b", "path": "data"}, f"g{step}"),
            ScriptedCall("glob_files", {"pattern": "*.txt", "path": "data"}, f"l{step}"),
        ]
        return Turn(text=PARAGRAPH, calls=calls, chunk_size=4, delay=chunk_delay)

    server = FakeOpenAIServer(responder=responder).start()
    server.chat_requests = _Discard()  # type: ignore[assignment] - a long run would keep every request
    conn.send(server.url)
    conn.recv()
    server.stop()


class _Discard(list):  # noqa: D101 - a list that keeps nothing
    def append(self, item: Any) -> None:
        return None


# -- the database writers (child processes) ------------------------------------------------------------
def _writer(db_path: str, stop: Any) -> None:
    """Commit a session and ten messages per transaction, as a CLI run does, until told to stop."""
    conn = sqlite3.connect(db_path, timeout=30, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 30000")
    n = 0
    while not stop.is_set():
        sid = f"ses_writer_{os.getpid()}_{n}"
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO agent_sessions (id, title, source) VALUES (?, ?, 'cli')", (sid, f"writer {n}"))
        conn.executemany("INSERT INTO agent_messages (session_id, role, content) VALUES (?, ?, ?)",
                         [(sid, "assistant", PARAGRAPH) for _ in range(10)])
        conn.execute("COMMIT")
        n += 1
        time.sleep(0.01)


# -- the server (subprocess) ---------------------------------------------------------------------------
def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_env(base: Path, llm_url: str) -> dict[str, str]:
    """The environment of the server (and of CLI processes sharing its library): the scripted LLM, the
    library under ``base``, nothing of the caller's own astro/Jupyter settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "LLM_", "ASTRO_", "JUPYTER_")) or k == "ASTRO_HOST_PROFILE"}
    env.update({"ASTRO_HOME": str(base / "astro_home"), "ASTRO_PROJECT_ROOT": str(base / "project"),
                "OPENAI_BASE_URL": llm_url, "OPENAI_API_KEY": "sk-bench", "LLM_MODEL": "bench-model",
                "ASTRO_MAX_STEPS": "200", "JUPYTER_CONFIG_DIR": str(base / "jcfg"),
                "JUPYTER_RUNTIME_DIR": str(base / "jrt"), "HF_HUB_OFFLINE": "1"})
    return env


def start_server(base: Path, llm_url: str, slow_ms: float, extra: list[str],
                 ready_path: str = "/astro/api/sessions",
                 pythonpath: str | None = None) -> tuple[subprocess.Popen, str, Path]:
    """A fresh server; returns once ``ready_path`` answers 200 (``/api/status``: no astro request made yet).
    ``pythonpath``: the astro_jupyter it runs (another checkout), instead of the caller's."""
    project = base / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "big.txt").write_text("".join(f"line {i}: {PARAGRAPH[:120]}\n" for i in range(600)))
    for i in range(60):
        (project / "data" / f"f{i}.txt").write_text("".join(f"line {j} of file {i}\n" for j in range(200)))
    port = _port()
    env = bench_env(base, llm_url)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    if slow_ms > 0:
        env["PYTHONASYNCIODEBUG"] = "1"
        env["ASTRO_BENCH_SLOW_SECS"] = str(slow_ms / 1000)
    log = base / "server.log"
    boot = ("import asyncio, os, sys\n"
            "slow = float(os.environ.get('ASTRO_BENCH_SLOW_SECS') or 0)\n"
            "if slow:\n"
            "    class P(asyncio.DefaultEventLoopPolicy):\n"
            "        def new_event_loop(self):\n"
            "            loop = super().new_event_loop(); loop.slow_callback_duration = slow; return loop\n"
            "    asyncio.set_event_loop_policy(P())\n"
            "from jupyter_server.serverapp import main\n"
            "sys.exit(main())\n")
    proc = subprocess.Popen(
        [sys.executable, "-c", boot, "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={project}",
         "--ServerApp.jpserver_extensions={'astro_jupyter': True}", "--ServerApp.log_level=WARN", *extra],
        env=env, cwd=project, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    import httpx2

    deadline = time.monotonic() + 90
    while True:  # polled every 50 ms: the cold first-token figure starts when the server answers
        if proc.poll() is not None:
            raise SystemExit(f"the server exited:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            if httpx2.get(f"{url}{ready_path}", headers=AUTH, timeout=2).status_code == 200:
                return proc, url, log
        except httpx2.TransportError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the server did not start within 90 s")
        time.sleep(0.05)


# -- one case ------------------------------------------------------------------------------------------
async def _reader(client: Any, url: str, run_id: str, counts: list[int]) -> None:
    """Counts the run's events the reader got: by ids, so deltas the server merged for a
    reader that fell behind count as the events they carry."""
    last = 0
    async with client.stream("GET", f"{url}/astro/api/runs/{run_id}/events", headers=AUTH) as response:
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                seq = int(line[4:])
                counts[0] += seq - last
                last = seq
            elif line.startswith("data: ") and '"type":"done"' in line:
                return


def cpu_secs(pid: int) -> float:
    """User + system CPU seconds of a process (its threads included), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_secs() -> tuple[float, float]:
    """CPU seconds all cores spent busy since boot (user, nice, system, irq, softirq, steal), and of
    those the steal (time a hypervisor gave this VM's CPUs to someone else), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]) / tick, fields[7] / tick


def child_pids(pid: int) -> list[int]:
    """The server's child processes (the agent host, kernels), from /proc."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(p) for p in task.read_text().split()]
        except OSError:
            continue
    return found


def children_cpu_secs(pid: int) -> float:
    total = 0.0
    for child in child_pids(pid):
        try:
            total += cpu_secs(child)
        except (OSError, IndexError, ValueError):
            continue
    return total


async def run_case(url: str, runs: int, window: float, pid: int, profile_to: Path | None = None) -> dict[str, Any]:
    import httpx2

    limits = httpx2.Limits(max_connections=runs + 10, max_keepalive_connections=runs + 10)
    async with httpx2.AsyncClient(timeout=60, limits=limits) as client:
        started = []
        for i in range(runs):
            resp = await client.post(f"{url}/astro/api/runs", headers=AUTH, json={"prompt": f"busy run {i}"})
            resp.raise_for_status()
            started.append(resp.json())
        counts = [0]
        readers = [asyncio.create_task(_reader(client, url, s["run_id"], counts)) for s in started]
        await asyncio.sleep(1.0)  # let every run reach its stream
        latencies: list[float] = []
        async with httpx2.AsyncClient(timeout=60) as probe:
            await probe.get(f"{url}/astro/api/sessions", headers=AUTH)  # connection warm
            end = time.perf_counter() + window
            events_before = counts[0]
            cpu_before = cpu_secs(pid)
            child_before = children_cpu_secs(pid)
            machine_before = machine_busy_secs()
            spy = None
            if profile_to is not None:
                local = Path(sys.executable).parent / "py-spy"  # installed into this venv, else on PATH
                spy = subprocess.Popen([str(local) if local.exists() else "py-spy", "record", "-p", str(pid), "-d", str(max(1, int(window))), "-r", "100",
                                        "--gil", "--nonblocking", "-f", "raw", "-o", str(profile_to)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                resp = await probe.get(f"{url}/astro/api/sessions", headers=AUTH)
                latencies.append((time.perf_counter() - t0) * 1000)
                assert resp.status_code == 200, resp.text
                await asyncio.sleep(max(0.0, 0.02 - (time.perf_counter() - t0)))
            events = counts[0] - events_before
            cpu = cpu_secs(pid) - cpu_before
            child_cpu = max(0.0, children_cpu_secs(pid) - child_before)
            machine_after = machine_busy_secs()
            machine, steal = machine_after[0] - machine_before[0], machine_after[1] - machine_before[1]
            if spy is not None:
                await asyncio.get_running_loop().run_in_executor(None, spy.wait)
        for s in started:
            await client.post(f"{url}/astro/api/runs/{s['run_id']}/cancel", headers=AUTH, json={})
        await asyncio.wait_for(asyncio.gather(*readers, return_exceptions=True), 120)
    latencies.sort()
    return {"runs": runs, "n": len(latencies), "p50": statistics.median(latencies),
            "p95": latencies[max(0, int(round(0.95 * len(latencies))) - 1)], "max": latencies[-1],
            "events_per_s": events / window, "cpu_share": cpu / window,
            "cpu_ms_per_event": cpu * 1000 / max(1, events), "child_cpu_share": child_cpu / window,
            "machine_share": machine / window, "steal_share": steal / window}


async def chunk_cost(llm_url: str, rounds: int = 4) -> dict[str, float]:
    """Client-side CPU microseconds per streamed chunk: the SDK's typed objects
    (``chat.completions.create``) vs the raw JSON path the runtime uses (``open_chat_stream``)."""
    import openai

    client = openai.AsyncOpenAI(base_url=llm_url, api_key="k", max_retries=0)
    body = {"messages": [{"role": "user", "content": "cost probe"}]}
    cost: dict[str, list[float]] = {"typed": [], "raw": []}
    try:
        from astro_jupyter.llm.client import open_chat_stream
    except ImportError:  # a version before the raw path: only the typed figure
        del cost["raw"]
    for _ in range(rounds):
        for label in cost:
            n, t0 = 0, time.process_time()
            if label == "typed":
                stream = await client.chat.completions.create(model="m", messages=[], stream=True, extra_body=body,
                                                              stream_options={"include_usage": True})
                async for chunk in stream:
                    n += 1
                    _ = [c.delta.content for c in chunk.choices]
            else:
                stream = await open_chat_stream(client, "m", body)
                async for chunk in stream:
                    n += 1
                    _ = [c["delta"].get("content") for c in chunk.get("choices") or []]
            cost[label].append((time.process_time() - t0) / max(1, n) * 1e6)
    await client.close()
    return {k: statistics.median(v) for k, v in cost.items()}


LAYERS = (  # (label, frames that put a sample in it), first match wins
    ("LLM stream (openai/httpx2/httpcore2/anyio)", ("LlmClient.", "open_chat_stream", "AsyncStream", "httpcore2", "httpx2")),
    ("SSE handler", ("RunEventsHandler", "_pump (", "live_batches", "_stored_events")),
    ("GET sessions", ("SessionsHandler",)),
    ("other requests", ("RequestHandler._execute", "HTTP1ServerConnection", "HTTP1Connection")),
    ("file tools, pool threads", ("FsPool._work",)),
    ("tools on the loop", ("execute_with_progress", "StreamingToolExecutor", "ToolExecutor")),
    ("SQLite threads", ("_connection_worker_thread",)),
    ("event persister", ("_persist_loop", "_flush_now", "EventBus._reserve")),
    ("turn loop", ("AgentRuntime", "_run_loop", "RunHandle")),
)


def profile_summary(raw: Path, top: int = 15) -> list[str]:
    """Shares of GIL-holding samples by layer, then the functions with the most own samples."""
    layers: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        total += int(n)
        layers[next((label for label, keys in LAYERS if any(k in stack for k in keys)), "other")] += int(n)
        own[re.sub(r":\d+\)", ")", stack.split(";")[-1])] += int(n)
    if not total:
        return ["(no samples: is py-spy installed, and may it attach to the server?)"]
    out = [f"{total} samples with the GIL held, by layer:"]
    out += [f"{100 * c / total:6.1f}%  {label}" for label, c in layers.most_common()]
    out.append("functions with the most own samples:")
    out += [f"{100 * c / total:6.1f}%  {name[:150]}" for name, c in own.most_common(top)]
    return out


def slow_callbacks(log: Path, top: int = 12) -> list[tuple[str, int, float]]:
    """(what, count, worst seconds) of asyncio's "Executing ... took N seconds" warnings."""
    found: dict[str, list[float]] = collections.defaultdict(list)
    pattern = re.compile(r"Executing (.*?) took (\d+\.\d+) seconds")
    for line in log.read_text(errors="replace").splitlines():
        m = pattern.search(line)
        if m:
            what = re.sub(r"0x[0-9a-f]+", "0x", m.group(1))
            what = re.sub(r"(run|ses|sse-run)_[0-9a-f]+", r"\1_*", what)[:220]
            found[what].append(float(m.group(2)))
    rows = [(w, len(v), max(v)) for w, v in found.items()]
    return sorted(rows, key=lambda r: (-r[1] * r[2], r[0]))[:top]


async def main(cases: list[int], window: float, writers: int, slow_ms: float, chunk_delay: float, extra: list[str],
               profile: bool = False) -> None:
    parent, child = mp.Pipe()
    llm = mp.Process(target=_serve_llm, args=(child, chunk_delay), daemon=True)
    llm.start()
    llm_url = parent.recv()
    with tempfile.TemporaryDirectory(prefix="astro-load-") as tmp:
        proc, url, log = start_server(Path(tmp), llm_url, slow_ms, extra)
        print(f"server pid {proc.pid} (attach a profiler here)", flush=True)
        stop = mp.Event()
        procs = [mp.Process(target=_writer, args=(str(Path(tmp) / "astro_home" / "astro.db"), stop), daemon=True)
                 for _ in range(writers)]
        try:
            import httpx2

            idle: list[float] = []
            async with httpx2.AsyncClient(timeout=30) as probe:
                for _ in range(100):
                    t0 = time.perf_counter()
                    await probe.get(f"{url}/astro/api/sessions", headers=AUTH)
                    idle.append((time.perf_counter() - t0) * 1000)
            idle.sort()
            cost = await chunk_cost(llm_url)
            print("client CPU per streamed chunk (us): " + ", ".join(f"{k} {v:.0f}" for k, v in cost.items()))
            for p in procs:
                p.start()
            print(f"GET astro/api/sessions latency (ms), {window:g} s window per case, {writers} DB writer process(es), "
                  f"LLM chunks of 4 characters every {chunk_delay * 1000:g} ms per run; "
                  f"cpu count {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
            print(f"{'concurrent runs':>16} {'requests':>9} {'p50':>8} {'p95':>8} {'max':>8} {'events/s':>9} "
                  f"{'srv cpu':>9} {'ms/event':>9} {'child cpu':>10} {'machine':>8} {'steal':>6}")
            print(f"{'idle':>16} {len(idle):>9} {statistics.median(idle):>8.1f} {idle[94]:>8.1f} {idle[-1]:>8.1f} {'-':>9}")
            profile_to = Path(tmp) / "profile.txt" if profile else None
            for i, n in enumerate(cases):
                row = await run_case(url, n, window, proc.pid, profile_to if i == len(cases) - 1 else None)
                print(f"{n:>16} {row['n']:>9} {row['p50']:>8.1f} {row['p95']:>8.1f} {row['max']:>8.1f} "
                      f"{row['events_per_s']:>9.0f} {row['cpu_share']:>9.2f} {row['cpu_ms_per_event']:>9.3f} "
                      f"{row['child_cpu_share']:>10.2f} {row['machine_share']:>8.2f} {row['steal_share']:>6.2f}", flush=True)
        finally:
            stop.set()
            for p in procs:
                p.join(timeout=10)
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            parent.send("stop")
            llm.join(timeout=10)
        if profile_to is not None:
            print(f"\nwhere the server's GIL time went with {cases[-1]} runs (py-spy --gil):")
            print("\n".join(profile_summary(profile_to)))
        if slow_ms > 0:
            print(f"\ncallbacks that held the server's event loop > {slow_ms:g} ms (count, worst ms):")
            for what, count, worst in slow_callbacks(log):
                print(f"{count:>6} {worst * 1000:>8.1f}  {what}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, nargs="+", default=[1, 5, 20])
    ap.add_argument("--window", type=float, default=6.0, help="seconds of probing per case")
    ap.add_argument("--writers", type=int, default=0, help="processes writing to the same astro.db")
    ap.add_argument("--slow-ms", type=float, default=0.0, help="report server callbacks slower than this")
    ap.add_argument("--chunk-delay", type=float, default=0.012,
                    help="seconds between streamed chunks of ~1 token (0.012: ~80 tokens/s, a fast hosted model)")
    ap.add_argument("--profile", action="store_true", help="sample the server with py-spy during the last case")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="extra server option, e.g. --server-arg=--AstroConfig.tool_timeout_secs=30")
    args = ap.parse_args()
    asyncio.run(main(args.runs, args.window, args.writers, args.slow_ms, args.chunk_delay, args.server_arg, args.profile))
