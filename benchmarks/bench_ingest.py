"""Bulk ingest throughput: ``library ingest`` on a 2-worker Dask ``LocalCluster`` vs one process, same PDFs.

Run: ``python benchmarks/bench_ingest.py [--papers 200] [--rounds 2] [--embed lexical|local]`` from the
checkout (needs ../shared/data/pdfs and dask.distributed).

The corpus: ``--papers`` distinct PDFs made from the two real papers in shared/data/pdfs
(``tests/fakes/pdf_corpus.py``: each copy gets its own title page and metadata title and a page range that
moves with its number, so each has its own content, hash and title). Each round ingests all of them twice,
into two fresh libraries, one after the other: one process (``--workers 1``: parse + embed on a thread of
the command's process) then the 2-worker LocalCluster (started once, before the rounds, as a cluster on
HPC is). Both include every write. Printed: papers/s of each, the ratio per round and the median ratio
(goal: ≥ 1.7 on 2 cores), the load average next to each, and a check that both libraries hold the same
papers with the same chunks and vectors (an assertion: the figure means nothing otherwise).

Run it on a quiet machine: with the kernel's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``)
a busy machine gives this whole session, cluster workers included, one share of the CPU, so the cluster
gets little more CPU than the one process did and the ratio falls toward 1 (below it at load 10+), whatever the code does.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.pdf_corpus import library_snapshot, make_corpus  # noqa: E402

SHARED_PDFS = ROOT.parent / "shared" / "data" / "pdfs"
if not SHARED_PDFS.is_dir():  # a git worktree nested one level deeper
    SHARED_PDFS = next((p / "shared" / "data" / "pdfs" for p in ROOT.parents if (p / "shared" / "data" / "pdfs").is_dir()),
                       SHARED_PDFS)


def load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


async def ingest(home: Path, corpus: Path, embed: str, **where: object) -> tuple[float, int]:
    from astro_jupyter.app import AstroApp
    from astro_jupyter.config import AstroConfig

    app = AstroApp(AstroConfig(home=str(home), embed_model=embed), source="cli")
    await app.start()
    try:
        started = time.perf_counter()
        report = await app.ingest([str(corpus)], **where)  # type: ignore[arg-type]
        seconds = time.perf_counter() - started
    finally:
        await app.close()
    assert not report.failed, report.failed
    return seconds, len(report.ingested)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--papers", type=int, default=200)
    parser.add_argument("--pages", type=int, default=4, help="body pages per copy")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--embed", choices=["lexical", "local"], default="lexical")
    args = parser.parse_args()
    from distributed import LocalCluster

    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        make_corpus(SHARED_PDFS, work / "corpus", args.papers, pages=args.pages)
        print(f"corpus: {args.papers} distinct PDFs ({args.pages + 1} pages each) in {time.perf_counter() - t0:.1f} s; "
              f"embedding: {args.embed}; {os.cpu_count()} cores")
        ratios = []
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            # warm-up, not measured: the workers import the parser and the embedder once, as a long-lived cluster has
            make_corpus(SHARED_PDFS, work / "warm", 4, pages=1)
            asyncio.run(ingest(work / "warm-home", work / "warm", args.embed, scheduler=cluster.scheduler_address))
            asyncio.run(ingest(work / "warm-home-1", work / "warm", args.embed, workers=1))
            for r in range(1, args.rounds + 1):
                one_home, dask_home = work / f"one-{r}", work / f"dask-{r}"
                before = load()
                one_s, n1 = asyncio.run(ingest(one_home, work / "corpus", args.embed, workers=1))
                mid = load()
                dask_s, n2 = asyncio.run(ingest(dask_home, work / "corpus", args.embed,
                                                scheduler=cluster.scheduler_address))
                after = load()
                assert n1 == n2 == args.papers, (n1, n2)
                one_lib = asyncio.run(library_snapshot(one_home))
                dask_lib = asyncio.run(library_snapshot(dask_home))
                assert len(one_lib) == args.papers and one_lib == dask_lib, "the libraries differ"
                chunks = sum(len(c) for c in one_lib.values())
                ratio = one_s / dask_s
                ratios.append(ratio)
                print(f"round {r}: one process {n1 / one_s:6.2f} papers/s ({one_s:6.1f} s; {before}) | "
                      f"2-worker LocalCluster {n2 / dask_s:6.2f} papers/s ({dask_s:6.1f} s; {mid}) | "
                      f"ratio {ratio:.2f} ({after}); same {chunks} chunks and vectors: yes")
        print(f"median ratio (2-worker LocalCluster / one process): {statistics.median(ratios):.2f} (goal >= 1.7)")


if __name__ == "__main__":
    main()
