"""The shared library on PostgreSQL against the SQLite library, side by side in one run (issue 27).

Run: ``python benchmarks/bench_shared_library.py`` from the checkout (``--papers 1000 --chunks 100``;
``--pgvector`` uses the pgserver wheel's PostgreSQL with pgvector instead of Debian's, ``--users 10``).

1. **rag_search p50**: the same synthetic library in both — N papers × M chunks of text drawn from a
   Zipf-distributed vocabulary, and the same random unit vectors stored in the active embedding space
   (``lexical-v2``, 384 dimensions) — then hybrid ``rag.search`` for the same queries, alternating
   SQLite, PostgreSQL, SQLite, … (the machine is shared: both sides see the same load). Prints both
   medians, their ratio and how many queries return the same top 3.
2. **users at once**: U users (each a container with its own home, pool and index, as on a hub) add
   papers — some every user adds, some their own — parse them under the parse claim (chunks + vectors
   written once) and search between adds. Prints lost papers, duplicates, chunk counts per paper and the
   search latency p50/p95 over all users.

A real PostgreSQL server is started for the run (tests/fakes/postgres.py) and removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from astro_jupyter.config import AstroConfig  # noqa: E402
from astro_jupyter.services.container import ServiceContainer  # noqa: E402
from astro_jupyter.services.parse.chunking import Chunk  # noqa: E402
from astro_jupyter.store.papers import PaperRecord  # noqa: E402
from tests.fakes import postgres  # noqa: E402

DIM = 384
SEED = 2027


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


async def users_at_once(url: str, tmp: Path, users: int, common: int, own: int, chunks: int, first: int) -> None:
    corpus = Corpus()
    print(f"\n2. {users} users at once on the same library: each adds {common} papers every user adds and {own} of "
          f"their own ({chunks} chunks each), searching after each add (load {os.getloadavg()[0]:.1f})")
    containers = []
    for u in range(users):
        c = ServiceContainer(AstroConfig(home=str(tmp / f"user{u}"), embed_model="lexical", shared_library_url=url,
                                         shared_library_dir=str(tmp / "shared")))
        await c.start()
        c.paper_store.user = f"user{u}"
        containers.append(c)
    queries = corpus.queries(200)
    latencies: list[float] = []
    wrote: list[str] = []
    before = await containers[0].library.papers.count()

    async def user(u: int, c: ServiceContainer) -> None:
        rng = random.Random(u)
        mine = [first + i for i in range(common)] + [first + common + u * own + i for i in range(own)]
        rng.shuffle(mine)
        await c.rag.search("warm up", 8)
        for paper in mine:
            pid, did = await add_paper(c, corpus, paper, chunks)
            if did:
                wrote.append(pid)
            t = time.perf_counter()
            await c.rag.search(rng.choice(queries), 8)
            latencies.append((time.perf_counter() - t) * 1000)

    start = time.perf_counter()
    try:
        await asyncio.gather(*(user(u, c) for u, c in enumerate(containers)))
        secs = time.perf_counter() - start
        c = containers[0]
        expected = common + users * own
        stored = await c.library.papers.count() - before
        found = [await c.library.papers.find_by(arxiv_id=f"2701.{first + i:05d}") for i in range(expected)]
        missing = [i for i, r in enumerate(found) if r is None]
        counts = [await c.chunks.count(r.id) for r in found if r is not None] or [0]
        dup_rows = await c.shared_library.fetchval(
            "SELECT count(*) - count(DISTINCT arxiv_id) FROM papers WHERE arxiv_id LIKE '2701.%'")
        p95 = float(np.percentile(latencies, 95))
        print(f"  {len(latencies)} searches and {users * (common + own)} adds in {secs:.0f} s")
        print(f"  papers: expected {expected}, stored {stored}, lost {len(missing)}, duplicate rows {dup_rows}; "
              f"chunks written by {len(wrote)} adds for {len(set(wrote))} papers; chunks per paper "
              f"{min(counts)}–{max(counts)} (want {chunks})")
        print(f"  search latency over all users: p50 {statistics.median(latencies):.1f} ms, p95 {p95:.1f} ms "
              f"(target ≤ 200 ms); load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        for c in containers:
            await c.close()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--papers", type=int, default=1000)
    ap.add_argument("--chunks", type=int, default=100, help="chunks per paper")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--users", type=int, default=10)
    ap.add_argument("--common", type=int, default=5, help="papers every user adds")
    ap.add_argument("--own", type=int, default=3, help="papers each user adds alone")
    ap.add_argument("--pgvector", action="store_true", help="PostgreSQL with pgvector (the pgserver wheel)")
    ap.add_argument("--users-only", action="store_true", help="fill the shared library, skip the SQLite comparison")
    args = ap.parse_args()
    bindir = postgres.pgserver_bindir() if args.pgvector else postgres.debian_bindir()
    if bindir is None:
        sys.exit("no PostgreSQL: apt-get install postgresql (or pip install pgserver==0.1.4 for --pgvector)")
    server = postgres.start(bindir)
    print(f"PostgreSQL {server.psql('SHOW server_version')} from {bindir}; {os.cpu_count()} cores")
    try:
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            url = server.create_database("bench")
            if args.users_only:
                shared = ServiceContainer(AstroConfig(home=str(tmp / "fill"), embed_model="lexical",
                                                      shared_library_url=url, shared_library_dir=str(tmp / "shared")))
                await shared.start()
                await fill(shared, Corpus(), args.papers, args.chunks, "PostgreSQL")
                await shared.close()
            else:
                await side_by_side(url, tmp, args.papers, args.chunks, args.queries)
            await users_at_once(url, tmp, args.users, args.common, args.own, args.chunks, first=args.papers)
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
