"""kNN over chunk embeddings: our hot path vs sqlite-vec vec0 brute force vs the NumPy floor.

Run: ``python benchmarks/bench_knn.py [--n 100000] [--dim 384] [--queries 200]``.
Vectors are stored exactly as the RAG service stores them (``ChunkRepository.put_vectors``
into a vec0 table of a temporary database); the hot path is ``VectorIndex.search`` (the
in-memory normalised matrix, loaded once from the vec0 table). Recall@10 is measured
against exact NumPy top-10. Goal: p50 ≤ 20 ms with recall@10 = 1.0 at 100k × 384.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from astro_jupyter.services.vector_index import VectorIndex  # noqa: E402
from astro_jupyter.store.chunks import ChunkRepository  # noqa: E402
from astro_jupyter.store.db import Database  # noqa: E402


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


async def run(n: int, dim: int, queries: int, k: int) -> None:
    rng = np.random.default_rng(7)
    matrix = rng.normal(size=(n, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = np.arange(1, n + 1, dtype=np.int64)
    qs = matrix[rng.integers(0, n, queries)] + rng.normal(scale=0.05, size=(queries, dim)).astype(np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    truth = [set(ids[np.argsort(-(matrix @ q))[:k]].tolist()) for q in qs]

    with tempfile.TemporaryDirectory() as tmp:
        db = await Database.open(Path(tmp) / "bench.db")
        print(f"driver {db.info.module}, SQLite {db.info.sqlite_version}, sqlite-vec {db.info.vec_version}; "
              f"{n} × {dim} float32, {queries} queries, k={k}; load average {os.getloadavg()[0]:.1f}\n")
        repo = ChunkRepository(db)
        space = await repo.ensure_space("bench", dim)
        t = time.perf_counter()
        step = 20_000
        for start in range(0, n, step):
            await repo.put_vectors(space, ids[start : start + step].tolist(), matrix[start : start + step])
        insert_s = time.perf_counter() - t

        index = VectorIndex(repo)
        t = time.perf_counter()
        await index.ensure(space)
        load_s = time.perf_counter() - t

        rows: list[tuple[str, list[float], float]] = []

        async def measure(name: str, search) -> None:  # type: ignore[no-untyped-def]
            times, hits = [], 0
            for q, want in zip(qs, truth):
                t0 = time.perf_counter()
                got = await search(q)
                times.append((time.perf_counter() - t0) * 1000)
                hits += len(want & {i for i, _ in got})
            rows.append((name, times, hits / (k * len(qs))))

        await measure("hot path (VectorIndex.search)", lambda q: index.search(space, q, k))
        vec_queries = max(20, queries // 4)
        saved = qs, truth
        qs, truth = qs[:vec_queries], truth[:vec_queries]
        if space.kind == "vec0":
            await measure(f"sqlite-vec vec0 MATCH (k = ?), {vec_queries} q", lambda q: repo.knn(space, q, k))
        qs, truth = saved

        async def numpy_floor(q: np.ndarray) -> list[tuple[int, float]]:
            scores = matrix @ q
            top = np.argpartition(-scores, k)[:k]
            return [(int(ids[i]), float(scores[i])) for i in top]

        await measure("NumPy matrix-vector + argpartition", numpy_floor)

        async def numpy_l2(q: np.ndarray) -> list[tuple[int, float]]:
            d = ((matrix - q) ** 2).sum(axis=1)
            top = np.argpartition(d, k)[:k]
            return [(int(ids[i]), float(d[i])) for i in top]

        saved = qs, truth
        qs, truth = qs[:vec_queries], truth[:vec_queries]
        await measure(f"NumPy ((X-q)**2).sum, {vec_queries} q", numpy_l2)
        qs, truth = saved
        await db.close()

    header = f"{'method':<44}{'p50 ms':>9}{'p99 ms':>9}{'mean ms':>9}{'recall@10':>11}"
    print(header)
    print("-" * len(header))
    for name, times, rec in rows:
        print(f"{name:<44}{statistics.median(times):9.2f}{pct(times, 0.99):9.2f}{statistics.mean(times):9.2f}{rec:11.3f}")
    print("-" * len(header))
    print(f"insert into vec0: {insert_s:.1f} s; cold load of the hot-path matrix from vec0: {load_s * 1000:.0f} ms")


async def end_to_end(n: int, queries: int) -> None:
    """The user's path: ``RagService.search`` (embed the query, kNN, FTS5 BM25, fusion, fetch rows)
    over ``n`` synthetic chunks stored and embedded exactly as parse_paper stores them."""
    from astro_jupyter.config import AstroConfig
    from astro_jupyter.services.container import ServiceContainer
    from astro_jupyter.services.parse.chunking import Chunk
    from astro_jupyter.store.papers import PaperRecord

    rng = np.random.default_rng(11)
    vocab = [f"w{i}" for i in range(20_000)] + "galaxy halo pulsar dust star cluster stream disk gas".split()
    weights = 1.0 / np.arange(1, len(vocab) + 1)  # Zipf-like word frequencies
    weights /= weights.sum()
    per_paper = 1000
    with tempfile.TemporaryDirectory() as tmp:
        c = ServiceContainer(AstroConfig(home=tmp))
        await c.start()
        try:
            t = time.perf_counter()
            for p in range(max(1, n // per_paper)):
                pid = f"local:synthetic-{p}"
                await c.library.papers.insert(PaperRecord(id=pid, title=f"Synthetic {p}", state="parsed"))
                words = rng.choice(len(vocab), size=(per_paper, 160), p=weights)
                chunks = [Chunk(i, f"{i % 7} Section", "body", i // 3 + 1, i // 3 + 1, " ".join(vocab[w] for w in row))
                          for i, row in enumerate(words)]
                await c.chunks.replace(pid, chunks)
                await c.rag.embed_chunks(await c.chunks.for_paper(pid))
            build = time.perf_counter() - t
            texts = [" ".join(vocab[w] for w in rng.choice(len(vocab), size=8, p=weights)) for _ in range(queries)]
            await c.rag.search(texts[0], 10)  # first search loads the matrix
            rows = []
            for mode in ("hybrid", "vector", "fts"):
                times = []
                for q in texts:
                    t0 = time.perf_counter()
                    await c.rag.search(q, 10, mode=mode)
                    times.append((time.perf_counter() - t0) * 1000)
                rows.append((mode, times))
            t0 = time.perf_counter()
            await c.rag.search(texts[1], 10, paper_ids=["local:synthetic-0", "local:synthetic-1"])
            filtered = (time.perf_counter() - t0) * 1000
        finally:
            await c.close()
    print(f"\nend to end: RagService.search over {n} chunks (built, stored and embedded in {build:.0f} s), {queries} queries")
    header = f"{'mode':<10}{'p50 ms':>9}{'p99 ms':>9}"
    print(header)
    print("-" * len(header))
    for mode, times in rows:
        print(f"{mode:<10}{statistics.median(times):9.2f}{pct(times, 0.99):9.2f}")
    print(f"hybrid restricted to 2 papers: {filtered:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--e2e", type=int, default=0, metavar="N",
                    help="also time the whole RagService.search over N synthetic chunks (e.g. 100000)")
    args = ap.parse_args()
    asyncio.run(run(args.n, args.dim, args.queries, args.k))
    if args.e2e:
        asyncio.run(end_to_end(args.e2e, min(args.queries, 100)))


if __name__ == "__main__":
    main()
