"""TAP figures against the local GAVO DaCHS: query_catalog's overhead over pyvo alone, and peak memory.

Run (as root, DaCHS installed: see .ci/run):
``python benchmarks/bench_tap.py [--repeat 41] [--repeat-large 5] [--rows 1000 100000] [--no-rss]``.

For 1,000 rows (sync) and 100,000 rows (an async job, as the tool chooses above 20,000) the same
ADQL runs side by side in one process, interleaved A, B, B, A, ... (the order flips every pair, so
neither side always runs first), after a few unrecorded warm-up rounds, ``--repeat`` times each
(``--repeat-large`` for 100,000 rows, whose async jobs take seconds):

- **pyvo**: ``TAPService(url).run_sync / run_async(adql, maxrec=N).to_table()``;
- **tool**: ``AstroApp.run_tool("query_catalog", ...)``: validation, permissions, executor, the
  result streamed to a file, parsed once, recorded in the store, the preview built.

The figure is median(tool) / median(pyvo); the median of the per-pair ratios and their quartiles
show the noise. The client's CPU seconds per query (``process_time`` of this process, both sides
in it) are printed too: the server's time is the same for both sides, so they show the tool's own
work with less of the shared machine's noise, and the load average before and after is printed next to it (the machine is shared:
compare only sides measured in the same run). Peak RSS is measured in a fresh process per side
(``ru_maxrss`` after the 100,000-row query, minus the process's RSS just before it, after a warm-up
query). The tool's figure includes the VOTable it wrote, the store and the preview; pyvo's is its table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ADQL = "SELECT TOP {n} source_id, ra, dec, vmag, plx FROM astrojup.stars"


def _rss_mb() -> float:
    """This process's resident memory now (the baseline)."""
    import psutil

    return psutil.Process().memory_info().rss / 1024**2


def _peak_mb() -> float:
    """The most this process has held so far (ru_maxrss, kB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pyvo_query(url: str, n: int) -> int:
    import pyvo

    service = pyvo.dal.TAPService(url)
    run = service.run_sync if n <= 20_000 else service.run_async
    return len(run(ADQL.format(n=n), maxrec=n).to_table())


async def tool_query(app: object, n: int) -> int:
    run = await app.run_tool("query_catalog", {"service": "local", "adql": ADQL.format(n=n), "maxrec": n})  # type: ignore[attr-defined]
    if run.is_error:
        raise RuntimeError(run.content)
    return int(run.metadata["catalog"]["row_count"])


async def make_app(url: str, home: str) -> object:
    from astro_jupyter.app import AstroApp
    from astro_jupyter.config import AstroConfig

    app = AstroApp(AstroConfig(home=home, project_root=home, tap_services={"local": url},
                               openai_base_url="http://127.0.0.1:9/v1"), source="cli")
    await app.start()
    return app


def child(side: str, url: str, n: int) -> None:
    """One query in this process; prints the RSS growth it caused (JSON)."""
    import importlib

    for module in ("pyvo", "astropy.table", "astropy.io.votable"):  # imported before the baseline, both sides
        importlib.import_module(module)

    with tempfile.TemporaryDirectory() as home:
        if side == "tool":
            async def go() -> None:
                app = await make_app(url, home)
                await tool_query(app, 10)  # warm (pyvo/astropy first-use costs), as the pyvo side below
                base = _rss_mb()
                rows = await tool_query(app, n)
                print(json.dumps({"rows": rows, "base_mb": base, "peak_mb": _peak_mb()}))
                await app.close()  # type: ignore[attr-defined]

            asyncio.run(go())
        else:
            pyvo_query(url, 10)
            base = _rss_mb()
            rows = pyvo_query(url, n)
            print(json.dumps({"rows": rows, "base_mb": base, "peak_mb": _peak_mb()}))


WARMUP = 3  # unrecorded rounds per side before timing (connection pools, first-use imports, caches)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 4:
        return min(values), max(values)
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=41, help="timed pairs at 1,000 rows")
    parser.add_argument("--repeat-large", type=int, default=5, help="timed pairs at 100,000 rows")
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--no-rss", action="store_true", help="skip the peak-memory children")
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "URL", "N"))
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    from tests.fakes.dachs import DachsServer

    server = DachsServer().start()
    try:
        with tempfile.TemporaryDirectory() as home:
            async def timings() -> dict[int, dict[str, list[float]]]:
                app = await make_app(server.tap_url, home)
                out: dict[int, dict[str, list[float]]] = {}

                async def once(side: str, n: int) -> tuple[float, float]:
                    start, cpu = time.perf_counter(), time.process_time()
                    rows = (await tool_query(app, n) if side == "tool"
                            else await asyncio.to_thread(pyvo_query, server.tap_url, n))
                    assert rows == n, (side, rows)
                    return time.perf_counter() - start, time.process_time() - cpu

                for n in args.rows:
                    repeat = args.repeat if n <= 20_000 else args.repeat_large
                    for _ in range(WARMUP if n <= 20_000 else 1):
                        await once("tool", n)
                        await once("pyvo", n)
                    out[n] = {"pyvo": [], "tool": [], "ratio": [], "pyvo_cpu": [], "tool_cpu": []}
                    for i in range(repeat):
                        pair = {}
                        for side in (("pyvo", "tool") if i % 2 == 0 else ("tool", "pyvo")):
                            pair[side], cpu = await once(side, n)
                            out[n][side].append(pair[side])
                            out[n][side + "_cpu"].append(cpu)
                        out[n]["ratio"].append(pair["tool"] / pair["pyvo"])
                await app.close()  # type: ignore[attr-defined]
                return out

            before = _load()
            results = asyncio.run(timings())
            after = _load()
        print(f"{'rows':>8} {'mode':>6} {'pairs':>5} {'pyvo s':>8} {'tool s':>8} {'tool/pyvo':>10} "
              f"{'pair ratios: median [q1, q3]':>30} {'client CPU s: pyvo':>19} {'tool':>7}")
        for n, sides in results.items():
            p, t = statistics.median(sides["pyvo"]), statistics.median(sides["tool"])
            q1, q3 = _quartiles(sides["ratio"])
            print(f"{n:>8,} {'sync' if n <= 20_000 else 'async':>6} {len(sides['ratio']):>5} {p:>8.3f} {t:>8.3f} "
                  f"{t / p:>10.2f} {statistics.median(sides['ratio']):>14.2f} [{q1:.2f}, {q3:.2f}] "
                  f"{statistics.median(sides['pyvo_cpu']):>19.3f} {statistics.median(sides['tool_cpu']):>7.3f}")
        print(f"({before} before, {after} after; target tool/pyvo <= 1.15)")
        if args.no_rss:
            return
        rss = {}
        for side in ("pyvo", "tool"):
            done = subprocess.run([sys.executable, __file__, "--child", side, server.tap_url, "100000"],
                                  capture_output=True, text=True, timeout=600, check=True)
            rss[side] = json.loads(done.stdout.strip().splitlines()[-1])
        grow = {s: rss[s]["peak_mb"] - rss[s]["base_mb"] for s in rss}
        print(f"peak RSS growth for 100,000 rows: pyvo {grow['pyvo']:.1f} MB, tool {grow['tool']:.1f} MB "
              f"(tool/pyvo {grow['tool'] / max(grow['pyvo'], 0.1):.2f}; the tool parses the VOTable as it streams to disk)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
