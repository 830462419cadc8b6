"""History search at scale: the ``search_history`` tool and the sidebar's search route on 100k and 1M messages.

Run: ``python benchmarks/bench_history_search.py [--sizes 100000,1000000] [--queries 30] [--rebuild]``.

The store is synthetic and seeded: sessions of 20 messages, each message 30 words of astronomy
vocabulary; "galaxy" is in ~30 % of messages (the common query), "redshift" and "spectrum" in
~10 % each (with three more mid-frequency pairs, the multi-word queries), each rare word in
~0.01 %, and "stars" (Zipf's head, stemmed with "star") in nearly every message. Stores are built
once through the real migrations (so the FTS triggers index them) and cached in
``$TMPDIR/astro-bench-history/`` (``--rebuild`` rebuilds them).

Measured, per query kind, p50/p95 in ms over ``--queries`` runs each:
  tool  — ``SearchHistoryTool.execute`` (first page of 10, the agent's call);
  route — ``AstroApp.search_history`` (first page of 20 with snippet_html, what
          ``GET astro/api/search/history`` answers; the owner filter included);
  page 3 — the route's third page, following the cursor ("more results"); only that request is timed.
"cpu ms" is the process's CPU time per call (all threads): on a shared, loaded machine it shows
the cost that wall-clock time hides. Goal: every p50 ≤ 50 ms at 1M messages.

Measured here (2 shared cores), p50 ms at 1M messages, tool / route:
  before (bm25() over every match, load 2.2): rare 1.2 / 8.2, common 947 / 648,
          multi-word 100 / 157, every-msg 1688 / 3156;
  after  (window 200, load 9.5):              rare 8.3 / 11.2, common 27 / 34,
          multi-word 16 / 22, every-msg 20 / 23; page 3 ≤ 33; 3.5–9.6 ms CPU per call.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from astro_jupyter.agent.tools.search_history import SearchHistoryTool  # noqa: E402
from astro_jupyter.config import AstroConfig  # noqa: E402
from astro_jupyter.app import AstroApp  # noqa: E402
from astro_jupyter.store.db import Database  # noqa: E402

SEED = 16
WORDS_PER_MESSAGE = 30
MESSAGES_PER_SESSION = 20
STORE_VERSION = 2  # bump when the generator changes so cached stores are rebuilt

# Background vocabulary (Zipf-weighted) and the query words with fixed per-message probabilities.
VOCAB = """
star stars stellar cluster clusters nebula nebulae quasar quasars pulsar pulsars magnetar blazar
supernova supernovae nova dwarf giant subgiant binary binaries exoplanet exoplanets planet planets
orbit orbital period periods transit transits eclipse eclipsing luminosity luminosities magnitude
magnitudes flux fluxes photometry spectroscopy spectral line lines emission absorption continuum
metallicity abundance abundances iron oxygen carbon hydrogen helium lithium neon ionised neutral
molecular gas dust cloud clouds disk disks halo halos bulge bar spiral elliptical lenticular
irregular merger mergers tidal stream streams accretion jet jets outflow outflows wind winds shock
shocks radio infrared optical ultraviolet xray gamma millimetre submillimetre band bands filter
filters telescope telescopes survey surveys catalogue catalogues archive pipeline calibration
calibrated reduction image images frame frames exposure exposures seeing airmass detector ccd pixel
pixels noise signal ratio sensitivity resolution aperture fibre slit grism echelle interferometry
baseline beam beams velocity velocities dispersion rotation curve curves kinematics dynamics mass
masses density densities temperature temperatures pressure entropy cooling heating feedback agn
nucleus nuclei black hole holes event horizon gravitational wave waves lensing lens lenses weak
strong cosmic microwave background anisotropy inflation dark matter energy baryon baryons acoustic
oscillation oscillations hubble constant tension parallax distance distances ladder cepheid cepheids
rr lyrae variable variables asteroseismology mode modes frequency frequencies power law slope index
fit fits model models simulation simulations hydrodynamic nbody cosmological box particle particles
resolution convergence bayesian posterior prior likelihood sampler mcmc chain chains uncertainty
uncertainties error errors systematic systematics bias biases selection completeness purity sample
samples median mean scatter correlation function clustering bias void voids filament filaments web
group groups field fields deep wide area sky coordinate coordinates epoch proper motion motions gaia
sdss desi euclid jwst hst alma vla lofar chandra xmm erosita fermi ztf tess kepler lsst rubin
""".split()
COMMON = ("galaxy", 0.30)
MID = (("redshift", 0.10), ("spectrum", 0.10))
RARE = [f"rareword{i:03d}" for i in range(40)]
RARE_P = 0.0001
QUERIES = {
    "rare": [w for w in RARE[:10]],
    "common": ["galaxy"],
    "multi-word": ["redshift spectrum", "halo mass", "dust emission", "orbital period"],
    "every-msg": ["stars"],
}


def store_path(n: int) -> Path:
    return Path(tempfile.gettempdir()) / "astro-bench-history" / f"history_{n}_s{SEED}_v{STORE_VERSION}" / "astro.db"


def make_messages(n: int) -> list[str]:
    rng = random.Random(SEED)
    weights = [1.0 / (rank + 1) for rank in range(len(VOCAB))]
    cum = list(_accumulate(weights))
    out: list[str] = []
    for _ in range(n):
        words = rng.choices(VOCAB, cum_weights=cum, k=WORDS_PER_MESSAGE)
        special: list[str] = []
        if rng.random() < COMMON[1]:
            special.append(COMMON[0])
        for word, p in MID:
            if rng.random() < p:
                special.append(word)
        if rng.random() < RARE_P * len(RARE):
            special.append(rng.choice(RARE))
        for word, pos in zip(special, rng.sample(range(WORDS_PER_MESSAGE), len(special))):
            words[pos] = word  # replace, so every message keeps 30 words
        out.append(" ".join(words).capitalize() + ".")
    return out


def _accumulate(values: list[float]) -> list[float]:
    total, out = 0.0, []
    for v in values:
        total += v
        out.append(total)
    return out


def _bulk_insert(conn: Any, n: int) -> None:
    texts = make_messages(n)
    rng = random.Random(SEED + 1)
    conn.execute("BEGIN")
    sessions = []
    for s in range(0, n, MESSAGES_PER_SESSION):
        title = " ".join(rng.choices(VOCAB[:120] + ["galaxy"] * 20, k=4)).title()
        sessions.append((f"ses_bench{s // MESSAGES_PER_SESSION:07d}", title, "bench"))
    conn.executemany("INSERT INTO agent_sessions (id, title, owner) VALUES (?, ?, ?)", sessions)
    rows = (
        (sessions[i // MESSAGES_PER_SESSION][0], f"run_{i // MESSAGES_PER_SESSION}", "user" if i % 2 == 0 else "assistant", text)
        for i, text in enumerate(texts)
    )
    conn.executemany("INSERT INTO agent_messages (session_id, run_id, role, content) VALUES (?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    conn.execute("INSERT INTO agent_messages_fts (agent_messages_fts) VALUES ('optimize')")


async def ensure_store(n: int, rebuild: bool) -> Path:
    path = store_path(n)
    ready = path.with_suffix(".ready")
    if ready.exists() and path.exists() and not rebuild:
        db = await Database.open(path)  # applies any migration added since the store was built
        await db.close()
        return path
    for stale in path.parent.glob("astro.db*"):
        stale.unlink()
    ready.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    db = await Database.open(path)
    await db.run_sync(_bulk_insert, n)
    await db.close()
    ready.write_text("ok")
    print(f"built {n:,} messages in {time.perf_counter() - t:.0f} s → {path}")
    return path


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


class _Ctx:
    """The part of ``ToolContext`` the tool reads."""

    def __init__(self, services: Any) -> None:
        self.services = services
        self.session_id = "ses_bench0000000"
        self.run_id = "run_current"
        self.owner = "bench"


async def measure(
    label: str, runs: int, fn: Callable[[str], Awaitable[int]], queries: list[str],
    prepare: Callable[[str], Awaitable[Any]] | None = None,
) -> tuple[str, float, float, float, int]:
    """p50/p95 wall ms, mean CPU ms (all threads of this process) and hits of ``fn`` (``prepare`` is not timed)."""
    await fn(queries[0])  # warm the page cache for this query shape
    times: list[float] = []
    cpu = 0.0
    hits = 0
    for i in range(runs):
        q = queries[i % len(queries)]
        arg = await prepare(q) if prepare else q
        c0, t0 = time.process_time(), time.perf_counter()
        hits = await fn(arg)
        times.append((time.perf_counter() - t0) * 1000)
        cpu += (time.process_time() - c0) * 1000
    return label, statistics.median(times), pct(times, 0.95), cpu / runs, hits


async def bench_size(n: int, runs: int, rebuild: bool) -> list[tuple[str, float, float, int]]:
    path = await ensure_store(n, rebuild)
    config = AstroConfig(home=str(path.parent))
    service = AstroApp(config)
    await service.services.start()
    tool = SearchHistoryTool()
    ctx = _Ctx(service.services)
    counts = {}
    for kind, qs in QUERIES.items():
        found = []
        for q in qs:
            match = " AND ".join(f'"{w}"' for w in q.split())
            found.append(await service.services.db.fetchval(
                "SELECT count(*) FROM agent_messages_fts WHERE agent_messages_fts MATCH ?", (match,)
            ))
        counts[kind] = statistics.median(found)
    print(f"\n{n:,} messages; median matches per query: "
          + ", ".join(f"{k} {v:,} ({v / n:.2%})" for k, v in counts.items()))

    async def via_tool(q: str) -> int:
        out = await tool.execute({"query": q}, ctx)  # type: ignore[arg-type]
        return len(out.metadata.get("hits") or [])

    async def via_route(q: str) -> int:
        reply = await service.search_history("bench", q, limit=20)
        return len(_results(reply))

    async def third_page_cursor(q: str) -> tuple[str, str | None]:
        reply = await service.search_history("bench", q, limit=20)
        reply = await service.search_history("bench", q, limit=20, cursor=reply["next_cursor"]) if reply["next_cursor"] else reply
        return q, reply.get("next_cursor")

    async def via_more(arg: Any) -> int:
        q, cursor = arg if isinstance(arg, tuple) else (arg, None)
        reply = await service.search_history("bench", q, limit=20, cursor=cursor)
        return len(_results(reply))

    rows = []
    paging = "cursor" in inspect.signature(service.search_history).parameters  # a route with "more results"
    for kind, qs in QUERIES.items():
        rows.append(await measure(f"{kind:10s} tool  (10 hits)", runs, via_tool, qs))
        rows.append(await measure(f"{kind:10s} route (20 hits)", runs, via_route, qs))
        if paging:
            rows.append(await measure(f"{kind:10s} route page 3", runs, via_more, qs, third_page_cursor))
    await service.services.close()
    return rows


def _results(reply: Any) -> list[Any]:
    return reply["results"] if isinstance(reply, dict) else reply


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; {WORDS_PER_MESSAGE} words/message, seed {SEED}")
    for n in (int(s) for s in args.sizes.split(",")):
        rows = await bench_size(n, args.queries, args.rebuild)
        print(f"{'query':34s} {'p50 ms':>8s} {'p95 ms':>8s} {'cpu ms':>8s} {'hits':>5s}   load {os.getloadavg()[0]:.1f}")
        for label, p50, p95, cpu, hits in rows:
            flag = "" if p50 <= 50 else "   > 50 ms"
            print(f"{label:34s} {p50:8.1f} {p95:8.1f} {cpu:8.1f} {hits:5d}{flag}")


if __name__ == "__main__":
    asyncio.run(main())
