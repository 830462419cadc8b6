"""The shared library on PostgreSQL against the SQLite library, side by side in one run (issue 27).

Run: ``python benchmarks/bench_shared_library.py`` from the checkout (``--papers 1000 --chunks 100``;
``--pgvector`` uses the pgserver wheel's PostgreSQL with pgvector instead of Debian's, ``--users 10``;
``--users-only`` skips part 1).

1. **rag_search p50**: the same synthetic library in both — N papers × M chunks of text drawn from a
   Zipf-distributed vocabulary, and the same random unit vectors stored in the active embedding space
   (``lexical-v2``, 384 dimensions) — then hybrid ``rag.search`` for the same queries, alternating
   SQLite, PostgreSQL, SQLite, … (the machine is shared: both sides see the same load). Prints both
   medians, their ratio and how many queries return the same top 3.
2. **users at once**: U users add papers — some every user adds, some their own — parse them under the
   parse claim (chunks + vectors written once) and search after each add. As on a hub, each user is a
   process of its own (spawned: its own event loop, pool and in-memory index), all talking to one
   PostgreSQL; ``--mode loop`` runs them all on one event loop instead (there a search also waits for
   the other users' parse and embed work on that loop, which no hub user does), ``both`` alternates.
   Prints lost papers, duplicates, chunk counts per paper, the search latency p50/p95 over all users,
   and where the time goes: each repository call of a search timed, lock waits over 20 ms from the
   server's log (``log_lock_waits``), the busy backends sampled from ``pg_stat_activity`` (on CPU or
   waiting for what), and the statements with the most time inside PostgreSQL (``pg_stat_statements``,
   when the server has it). ``--rounds`` repeats it on the same library with new papers; ``--baseline
   DIR`` alternates with the library of another checkout (an older commit) in the user processes.

A real PostgreSQL server is started for the run (tests/fakes/postgres.py) and removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import multiprocessing
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HNSW_PROBE_ENV = "ASTRO_BENCH_HNSW_PROBE"  # --hnsw-probe: the user processes also time an HNSW kNN in PostgreSQL
BASELINE_ENV = "ASTRO_BENCH_LIBRARY"  # --baseline: the user processes import the library from this checkout
sys.path.insert(0, os.environ.get(BASELINE_ENV) or str(ROOT))

from astro_jupyter.config import AstroConfig  # noqa: E402
from astro_jupyter.services.container import ServiceContainer  # noqa: E402
from astro_jupyter.services.parse.chunking import Chunk  # noqa: E402
from astro_jupyter.store.papers import PaperRecord  # noqa: E402
from tests.fakes import postgres  # noqa: E402

DIM = 384
SEED = 2027
LOCK_LOG_MS = 20  # the server logs every lock wait longer than this (log_lock_waits)


def vocabulary(n: int, rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 10))))
    return sorted(words)


class Corpus:
    """Deterministic synthetic papers: chunk texts and unit vectors from one seed."""

    def __init__(self, words: int = 5000) -> None:
        rng = random.Random(SEED)
        self.words = vocabulary(words, rng)
        weights = 1.0 / np.arange(1, words + 1)  # Zipf: a few common words, a long tail
        self.p = weights / weights.sum()

    def chunks(self, paper: int, n: int) -> list[Chunk]:
        rng = np.random.default_rng(SEED + paper)
        out = []
        for seq in range(n):
            idx = rng.choice(len(self.words), size=80, p=self.p)
            out.append(Chunk(seq, f"{seq // 10 + 1} Section", "body", seq // 4 + 1, seq // 4 + 1,
                             " ".join(self.words[i] for i in idx)))
        return out

    @staticmethod
    def vectors(paper: int, n: int) -> np.ndarray:
        m = np.random.default_rng(10_000_000 + paper).standard_normal((n, DIM)).astype(np.float32)
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    def queries(self, n: int) -> list[str]:
        rng = random.Random(SEED + 1)
        mid = self.words[50:2000]  # neither stopword-like nor unseen
        return [" ".join(rng.sample(mid, rng.randint(2, 4))) for _ in range(n)]


async def add_paper(c: ServiceContainer, corpus: Corpus, paper: int, chunks: int) -> tuple[str, bool]:
    """Store paper ``paper`` (as arXiv 2701.NNNNN) and, under the parse claim, its chunks and vectors once.
    Returns (id, whether this call wrote the chunks)."""
    record = await c.library.store(PaperRecord(arxiv_id=f"2701.{paper:05d}", title=f"Synthetic paper {paper}"))
    async with c.library.papers.parse_claim(record.id):
        if await c.chunks.count(record.id):
            return record.id, False
        ids = await c.chunks.replace(record.id, corpus.chunks(paper, chunks))
        space = await c.rag.space()
        await c.chunks.put_vectors(space, ids, corpus.vectors(paper, chunks))
        await c.library.set_state(record.id, "parsed")
        return record.id, True


async def fill(c: ServiceContainer, corpus: Corpus, papers: int, chunks: int, label: str) -> None:
    start = time.perf_counter()
    for paper in range(papers):
        await add_paper(c, corpus, paper, chunks)
    print(f"  {label}: {papers} papers, {await c.chunks.count()} chunks stored in {time.perf_counter() - start:.0f} s",
          flush=True)


def top3(hits: list) -> list[tuple[str, int]]:
    return [(h.chunk.paper_id, h.chunk.seq) for h in hits[:3]]


async def side_by_side(url: str, tmp: Path, papers: int, chunks: int, queries: int) -> None:
    corpus = Corpus()
    sqlite = ServiceContainer(AstroConfig(home=str(tmp / "sqlite"), embed_model="lexical"))
    shared = ServiceContainer(AstroConfig(home=str(tmp / "pg"), embed_model="lexical", shared_library_url=url,
                                          shared_library_dir=str(tmp / "shared")))
    await sqlite.start()
    await shared.start()
    try:
        print(f"1. rag_search, {papers} papers × {chunks} chunks, hybrid, k=8 (load {os.getloadavg()[0]:.1f})")
        await fill(sqlite, corpus, papers, chunks, "SQLite")
        await fill(shared, corpus, papers, chunks, "PostgreSQL")
        for c, label in ((sqlite, "SQLite"), (shared, "PostgreSQL")):
            start = time.perf_counter()
            await c.rag.search("warm up", 8)  # loads the in-memory index (once per process)
            print(f"  {label}: first search (index load) {time.perf_counter() - start:.1f} s", flush=True)
        times: dict[str, list[float]] = {"sqlite": [], "pg": []}
        same = 0
        for q in corpus.queries(queries):
            got = {}
            for key, c in (("sqlite", sqlite), ("pg", shared)):  # interleaved: A, B, A, B, ...
                t = time.perf_counter()
                got[key] = await c.rag.search(q, 8)
                times[key].append((time.perf_counter() - t) * 1000)
            same += top3(got["sqlite"]) == top3(got["pg"])
        p50 = {k: statistics.median(v) for k, v in times.items()}
        print(f"  rag_search p50: SQLite {p50['sqlite']:.1f} ms, PostgreSQL {p50['pg']:.1f} ms, "
              f"ratio {p50['pg'] / p50['sqlite']:.2f}× (target ≤ 1.5×); same top 3 in {same}/{queries} queries; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        await sqlite.close()
        await shared.close()


PHASES = (("data_version", "data_version"), ("missing_vectors", "missing-vector check"),
          ("changes_since", "index follow"), ("fts", "BM25"), ("get_many", "chunk rows"))


_SEARCHING: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("bench_search", default=None)


class Phases:
    """Where one user's searches spend their time: each repository call a search makes, timed (benchmark only)."""

    def __init__(self, c: ServiceContainer) -> None:
        self.current: dict[str, float] | None = None
        self.searches: list[dict[str, float]] = []
        for name, label in PHASES:
            self._wrap(c.chunks, name, label)
        self._wrap(c.rag.index, "ensure", "follow (applied)")
        self._wrap_product()
        self._wrap(c.rag.index, "search_floor", "vectors (with follow)")

    def _wrap(self, obj: object, name: str, label: str) -> None:
        fn = getattr(obj, name)

        async def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                # the search's own calls and those of tasks it started (the BM25 query beside the vector side),
                # not a background job's: those tasks carry the search's context
                if self.current is not None and _SEARCHING.get() is self.current:
                    self.current[label] = self.current.get(label, 0.0) + (time.perf_counter() - t) * 1000

        setattr(obj, name, timed)

    def _wrap_product(self) -> None:
        """The product itself (``similarities``), timed where it runs (a worker thread: to_thread carries the search's
        context)."""
        from astro_jupyter.services import vector_index

        fn = getattr(vector_index, "similarities", None)
        if fn is None or getattr(fn, "bench_wrapped", False):
            return

        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                current = _SEARCHING.get()
                if current is not None:
                    current["product"] = current.get("product", 0.0) + (time.perf_counter() - t) * 1000

        timed.bench_wrapped = True  # type: ignore[attr-defined]
        vector_index.similarities = timed

    async def search(self, c: ServiceContainer, query: str) -> float:
        self.current = {}
        token = _SEARCHING.set(self.current)
        t = time.perf_counter()
        try:
            await c.rag.search(query, 8)
        finally:
            _SEARCHING.reset(token)
            ms = (time.perf_counter() - t) * 1000
            self.current["total"] = ms
            self.searches.append(self.current)
            self.current = None
        return ms


def user_config(tmp: Path, url: str, u: int, run: int) -> AstroConfig:
    return AstroConfig(home=str(tmp / f"run{run}-user{u}"), embed_model="lexical", shared_library_url=url,
                       shared_library_dir=str(tmp / "shared"))


async def open_user(tmp: Path, url: str, u: int, run: int) -> ServiceContainer:
    c = ServiceContainer(user_config(tmp, url, u, run))
    await c.start()
    c.paper_store.user = f"user{u}"
    await c.rag.search("warm up", 8)  # the index load, once per user's server (before the clock starts)
    return c


async def user_session(c: ServiceContainer, u: int, papers: list[int], chunks: int) -> dict:
    """One user: add each paper (parse under the claim), search after each add; what they saw."""
    corpus = Corpus()
    rng = random.Random(u)
    queries = corpus.queries(200)
    phases = Phases(c)
    wrote: list[str] = []
    cpu = _cpu_secs()
    for paper in papers:
        pid, did = await add_paper(c, corpus, paper, chunks)
        if did:
            wrote.append(pid)
        query = rng.choice(queries)
        await phases.search(c, query)
        if os.environ.get(HNSW_PROBE_ENV):
            await hnsw_probe(c, query, phases.searches[-1])
    return {"wrote": wrote, "searches": phases.searches, "cpu": _cpu_secs() - cpu}


def _cpu_secs() -> float:
    """CPU seconds this process used so far (all its threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, every process in it (/proc/stat's first line)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields[:8]) - idle) / tick, sum(fields[:8]) / tick


def server_cpu_secs(server: postgres.PostgresServer) -> float:
    """CPU seconds of the PostgreSQL server so far: the postmaster, its live backends and those it reaped."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        master = int((server.root / "data" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == master:
            total += sum(int(x) for x in fields[11:15])  # utime, stime, and its reaped children's
        elif ppid == master:
            total += int(fields[11]) + int(fields[12])
    return total / tick


async def hnsw_probe(c: ServiceContainer, query: str, search: dict[str, float]) -> None:
    """--hnsw-probe: right after a search, the same question's kNN through pgvector's HNSW index inside
    PostgreSQL (one query; nothing followed or multiplied here), timed apart from the search's total."""
    from astro_jupyter.services.embed import embed_query

    space = await c.rag.space()
    if space.kind != "pgvector":
        return
    qvec = await embed_query(c.rag.embedder, query)
    t = time.perf_counter()
    await c.chunks.knn(space, qvec, 50)
    search["HNSW in PostgreSQL (probe)"] = (time.perf_counter() - t) * 1000


def user_papers(u: int, common: int, own: int, first: int) -> list[int]:
    mine = [first + i for i in range(common)] + [first + common + u * own + i for i in range(own)]
    random.Random(u).shuffle(mine)
    return mine


def _user_process(tmp: str, url: str, u: int, run: int, papers: list[int], chunks: int, barrier, results) -> None:
    """A hub user's single-user server: a process of its own, with its own pool and index."""

    async def go() -> dict:
        c = await open_user(Path(tmp), url, u, run)
        try:
            await asyncio.to_thread(barrier.wait, 900)  # everyone starts adding at once
            return await user_session(c, u, papers, chunks)
        finally:
            await c.close()

    try:
        results.put((u, asyncio.run(go())))
    except BaseException as exc:  # noqa: BLE001 - reported by the parent
        results.put((u, {"error": f"{type(exc).__name__}: {exc}"}))
        raise


async def users_in_processes(url: str, tmp: Path, users: int, plans: list[list[int]], chunks: int, run: int,
                             library: str = "", started=lambda: None) -> list[dict]:
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter per user, as JupyterHub spawns them
    barrier, results = ctx.Barrier(users + 1), ctx.Queue()
    procs = [ctx.Process(target=_user_process, args=(str(tmp), url, u, run, plans[u], chunks, barrier, results))
             for u in range(users)]
    if library:
        os.environ[BASELINE_ENV] = library
    try:
        for p in procs:
            p.start()
    finally:
        os.environ.pop(BASELINE_ENV, None)
    await asyncio.to_thread(barrier.wait, 900)
    started()  # every user's index is loaded: the clock starts
    out: dict[int, dict] = {}
    for _ in procs:
        u, result = await asyncio.to_thread(results.get, True, 1800)
        out[u] = result
    for p in procs:
        await asyncio.to_thread(p.join, 60)
    errors = [f"user{u}: {r['error']}" for u, r in out.items() if "error" in r]
    if errors:
        raise RuntimeError("; ".join(errors))
    return [out[u] for u in range(users)]


async def users_on_one_loop(url: str, tmp: Path, users: int, plans: list[list[int]], chunks: int, run: int,
                            library: str = "", started=lambda: None) -> list[dict]:
    containers = [await open_user(tmp, url, u, run) for u in range(users)]
    started()
    try:
        return list(await asyncio.gather(*(user_session(c, u, plans[u], chunks) for u, c in enumerate(containers))))
    finally:
        for c in containers:
            await c.close()


def pg_statements(server: postgres.PostgresServer, top: int = 8) -> str:
    """The statements that took the most time inside PostgreSQL since the last reset (pg_stat_statements)."""
    rows = server.psql(
        "SELECT calls, round(total_exec_time)::int, round(mean_exec_time::numeric, 2), round(max_exec_time)::int,"
        " regexp_replace(left(query, 90), '\\s+', ' ', 'g') FROM pg_stat_statements"
        " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'bench') AND query NOT LIKE '%pg_stat_activity%'"
        f" ORDER BY total_exec_time DESC LIMIT {top}",
        database="bench")
    lines = ["    calls   total ms   mean ms   max ms  statement"]
    for row in rows.splitlines():
        calls, total, mean, peak, query = row.split("|", 4)
        lines.append(f"    {calls:>5} {total:>10} {mean:>9} {peak:>8}  {query}")
    return "\n".join(lines)


def lock_waits(server: postgres.PostgresServer, since: int) -> dict[str, int]:
    """Lock waits longer than ``LOCK_LOG_MS`` in the server log from ``since`` on, by waiting statement."""
    log = (server.root / "server.log").read_bytes()[since:].decode(errors="replace").splitlines()
    waits: dict[str, int] = {}
    for n, line in enumerate(log):
        if "still waiting for" in line:
            statement = next((x.split("STATEMENT:", 1)[1].strip() for x in log[n + 1:n + 4] if "STATEMENT:" in x), "?")
            key = " ".join(statement.split())[:70]
            waits[key] = waits.get(key, 0) + 1
    return waits


async def sample_waits(url: str, samples: dict[str, int], every: float = 0.05) -> None:
    """What the server's busy backends are doing, sampled (pg_stat_activity): by statement, running on
    CPU or waiting (for a lock, a buffer another backend holds, I/O, …), until cancelled."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        while True:
            for r in await conn.fetch(
                    "SELECT coalesce(wait_event_type || ':' || wait_event, 'on CPU') AS w, left(query, 40) AS q"
                    " FROM pg_stat_activity WHERE state = 'active' AND datname = current_database()"
                    " AND pid <> pg_backend_pid()"):
                key = f"{' '.join(r['q'].split()):<40}  {r['w']}"
                samples[key] = samples.get(key, 0) + 1
            await asyncio.sleep(every)  # a sampling period, not a wait for something
    finally:
        await conn.close()


async def users_at_once(url: str, tmp: Path, users: int, common: int, own: int, chunks: int, first: int,
                        mode: str, run: int, server: postgres.PostgresServer, stats: bool, library: str = "") -> None:
    where = "each in a process of its own" if mode == "processes" else "all on one event loop in one process"
    if library:
        where += f", the library of {library}"
    print(f"\n2.{run} {users} users at once, {where}: each adds {common} papers every user adds and {own} of "
          f"their own ({chunks} chunks each), searching after each add (load {os.getloadavg()[0]:.1f})", flush=True)
    c = ServiceContainer(user_config(tmp, url, 99, run))
    await c.start()
    before = await c.library.papers.count()
    space = await c.rag.space()
    build = getattr(c.chunks, "ensure_ann_index", None)
    if os.environ.get(HNSW_PROBE_ENV) and space.kind == "pgvector" and build is not None:
        await build(space)  # what an HNSW search in PostgreSQL needs (and every write then keeps up to date)
    hnsw = space.kind == "pgvector" and await c.shared_library.fetchval(
        "SELECT to_regclass($1) IS NOT NULL", f"{space.name}_hnsw")
    print(f"  vector path: {c.shared_library.vector.describe()}; the space's column: {space.kind}"
          f"{'; with an HNSW index' if hnsw else ''}; searches: exact, in each user's memory", flush=True)
    plans = [user_papers(u, common, own, first) for u in range(users)]
    load = os.getloadavg()[0]
    samples: dict[str, int] = {}
    sampler: asyncio.Task | None = None
    at: dict[str, object] = {}

    def started() -> None:
        """Everything below counts from when the users start adding and searching, not from their servers'
        start (the index load of 100k vectors per user is not in a search's time either)."""
        nonlocal sampler
        if stats:
            server.psql("SELECT pg_stat_statements_reset()", database="bench")
        at.update(log=(server.root / "server.log").stat().st_size, load=os.getloadavg()[0],
                  server=server_cpu_secs(server), machine=machine_cpu(), start=time.perf_counter())
        sampler = asyncio.get_running_loop().create_task(sample_waits(url, samples))

    try:
        runner = users_in_processes if mode == "processes" else users_on_one_loop
        got = await runner(url, tmp, users, plans, chunks, run, library, started)
        start, log_at, server_cpu, machine = at["start"], at["log"], at["server"], at["machine"]
        load = max(load, at["load"])
        secs = time.perf_counter() - start
        sampler.cancel()
        load = max(load, os.getloadavg()[0])
        wrote = [pid for r in got for pid in r["wrote"]]
        searches = [s for r in got for s in r["searches"]]
        latencies = [s["total"] for s in searches]
        expected = common + users * own
        stored = await c.library.papers.count() - before
        found = [await c.library.papers.find_by(arxiv_id=f"2701.{first + i:05d}") for i in range(expected)]
        missing = [i for i, r in enumerate(found) if r is None]
        counts = [await c.chunks.count(r.id) for r in found if r is not None] or [0]
        dup_rows = await c.shared_library.fetchval(
            "SELECT count(*) - count(DISTINCT arxiv_id) FROM papers WHERE arxiv_id LIKE '2701.%'")
        p95 = float(np.percentile(latencies, 95))
        print(f"  {len(latencies)} searches and {users * (common + own)} adds in {secs:.0f} s")
        users_cpu = sum(r.get("cpu", 0.0) for r in got) if mode == "processes" else got[0].get("cpu", 0.0)
        print(f"  CPU over the run: user processes {users_cpu:.1f} s, PostgreSQL "
              f"{server_cpu_secs(server) - server_cpu:.1f} s; the machine (everything on it) "
              f"{machine_cpu()[0] - machine[0]:.1f} s busy of {machine_cpu()[1] - machine[1]:.0f} s")
        print(f"  papers: expected {expected}, stored {stored}, lost {len(missing)}, duplicate rows {dup_rows}; "
              f"chunks written by {len(wrote)} adds for {len(set(wrote))} papers; chunks per paper "
              f"{min(counts)}–{max(counts)} (want {chunks})")
        print("  where a search's time goes (ms per search; a call a search did not make counts 0):")
        for label in ("total", *[label for _, label in PHASES], "follow (applied)", "product", "vectors (with follow)",
                      "HNSW in PostgreSQL (probe)"):
            values = [s.get(label, 0.0) for s in searches]
            print(f"    {label:<22} p50 {statistics.median(values):7.1f}  p95 {np.percentile(values, 95):7.1f}"
                  f"  max {max(values):7.1f}  (in {sum(1 for s in searches if label in s)} searches)")
        waits = lock_waits(server, log_at)
        print(f"  lock waits over {LOCK_LOG_MS} ms: {sum(waits.values())}"
              + "".join(f"\n    {n} × {statement}" for statement, n in sorted(waits.items(), key=lambda x: -x[1])))
        print("  busy backends sampled every 50 ms (statement, what it was doing), most often first:")
        for key, n in sorted(samples.items(), key=lambda x: -x[1])[:10]:
            print(f"    {n:>5}  {key}")
        if stats:
            print("  inside PostgreSQL, most total time first:\n" + pg_statements(server))
        print(f"  search latency over all users ({mode}): p50 {statistics.median(latencies):.1f} ms, p95 {p95:.1f} ms "
              f"(target ≤ 200 ms); load {load:.1f} at start → {os.getloadavg()[0]:.1f} at end", flush=True)
    finally:
        if sampler is not None:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sampler
        await c.close()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--papers", type=int, default=1000)
    ap.add_argument("--chunks", type=int, default=100, help="chunks per paper")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--users", type=int, default=10)
    ap.add_argument("--common", type=int, default=5, help="papers every user adds")
    ap.add_argument("--own", type=int, default=3, help="papers each user adds alone")
    ap.add_argument("--rounds", type=int, default=1, help="users-at-once runs on the same library (new papers each)")
    ap.add_argument("--mode", choices=("processes", "loop", "both"), default="processes",
                    help="each user a process of its own (as on a hub), all on one event loop, or both alternating")
    ap.add_argument("--baseline", default="", metavar="DIR",
                    help="also run the user processes with the library of this checkout (an older commit), alternating")
    ap.add_argument("--server-log", default="", metavar="PATH",
                    help="keep the server's log here, with the plans of statements slower than 100 ms (auto_explain)")
    ap.add_argument("--pgvector", action="store_true", help="PostgreSQL with pgvector (the pgserver wheel)")
    ap.add_argument("--hnsw-probe", action="store_true",
                    help="with --pgvector: after each search, time the same kNN through HNSW inside PostgreSQL")
    ap.add_argument("--users-only", action="store_true", help="fill the shared library, skip the SQLite comparison")
    args = ap.parse_args()
    if args.hnsw_probe:
        os.environ[HNSW_PROBE_ENV] = "1"  # the spawned user processes inherit it
    bindir = postgres.pgserver_bindir() if args.pgvector else postgres.debian_bindir()
    if bindir is None:
        sys.exit("no PostgreSQL: apt-get install postgresql (or pip install pgserver==0.1.4 for --pgvector)")
    stats = (bindir.parent / "lib" / "pg_stat_statements.so").is_file()
    settings = {"log_lock_waits": "on", "deadlock_timeout": f"{LOCK_LOG_MS}ms"}
    if stats:
        settings.update({"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"})
    if args.server_log and (bindir.parent / "lib" / "auto_explain.so").is_file():
        # the plan of every slow statement (with its timings) goes to the log kept at the end
        settings.update({"session_preload_libraries": "auto_explain", "auto_explain.log_min_duration": "100ms",
                         "auto_explain.log_analyze": "on", "auto_explain.log_buffers": "on",
                         "auto_explain.log_nested_statements": "on"})
    server = postgres.start(bindir, settings)
    print(f"PostgreSQL {server.psql('SHOW server_version')} from {bindir}; {os.cpu_count()} cores")
    try:
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            url = server.create_database("bench")
            if stats:
                server.psql("CREATE EXTENSION pg_stat_statements", database="bench")
            if args.users_only:
                shared = ServiceContainer(AstroConfig(home=str(tmp / "fill"), embed_model="lexical",
                                                      shared_library_url=url, shared_library_dir=str(tmp / "shared")))
                await shared.start()
                await fill(shared, Corpus(), args.papers, args.chunks, "PostgreSQL")
                await shared.close()
            else:
                await side_by_side(url, tmp, args.papers, args.chunks, args.queries)
            modes = ["processes", "loop"] if args.mode == "both" else [args.mode]
            variants = [(m, "") for m in modes] + ([("processes", args.baseline)] if args.baseline else [])
            per_run = args.common + args.users * args.own
            for run in range(args.rounds * len(variants)):
                mode, library = variants[run % len(variants)]
                await users_at_once(url, tmp, args.users, args.common, args.own, args.chunks,
                                    args.papers + run * per_run, mode, run + 1, server, stats, library)
    finally:
        if args.server_log:
            shutil.copyfile(server.root / "server.log", args.server_log)
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
