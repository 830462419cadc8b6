"""Retrieval quality: MRR and hit@k of hybrid (fused scores) vs vector-only vs FTS-only.

Run: ``python benchmarks/bench_retrieval_quality.py [--k 10]`` from the checkout.
Builds a library in a temporary ASTRO_HOME from ../shared/data/pdfs/*.pdf (when present)
and tests/data/pdfs/{two_column,many_pages}.pdf, parsed with the real ``parse_paper`` service
path, then asks the labelled questions of ``benchmarks/data/retrieval_questions.json``.
A passage is relevant when it comes from the labelled PDF and contains the answer phrase.
The embedding backend is whatever ``services.embed.static_choice`` picks (lexical by default;
set ASTRO_EMBED_MODEL and OPENAI_BASE_URL to measure an endpoint model).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from astro_jupyter.config import AstroConfig  # noqa: E402
from astro_jupyter.services.container import ServiceContainer  # noqa: E402

QUESTIONS = ROOT / "benchmarks" / "data" / "retrieval_questions.json"


def library_pdfs() -> list[Path]:
    shared = ROOT.parent / "shared" / "data" / "pdfs"
    found = sorted(shared.glob("*.pdf")) if shared.is_dir() else []
    return found + [ROOT / "tests" / "data" / "pdfs" / n for n in ("two_column.pdf", "many_pages.pdf")]


def norm(text: str) -> str:
    return " ".join(text.lower().split())


async def run(k: int) -> None:
    questions = json.loads(QUESTIONS.read_text("utf-8"))["questions"]
    with tempfile.TemporaryDirectory() as tmp:
        config = AstroConfig(home=tmp)
        c = ServiceContainer(config)
        await c.start()
        try:
            by_pdf: dict[str, str] = {}
            t = time.perf_counter()
            for path in library_pdfs():
                record = await c.library.add_pdf(path, fetch=False)
                await c.parser.parse(record.id)
                by_pdf[path.name] = record.id
            build = time.perf_counter() - t
            chunks = await c.chunks.count()
            usable = [q for q in questions if q["pdf"] in by_pdf]
            print(f"library: {len(by_pdf)} PDFs, {chunks} chunks, parsed+embedded in {build:.1f} s; "
                  f"embedding backend {c.embedder.name}; {len(usable)} questions; load average {os.getloadavg()[0]:.1f}\n")
            rows = []
            for mode in ("hybrid", "vector", "fts"):
                rr, hit1, hitk, times = [], 0, 0, []
                for item in usable:
                    t = time.perf_counter()
                    hits = await c.rag.search(item["q"], k, mode=mode)
                    times.append((time.perf_counter() - t) * 1000)
                    rank = next(
                        (n for n, h in enumerate(hits, 1)
                         if h.chunk.paper_id == by_pdf[item["pdf"]] and norm(item["answer"]) in norm(h.chunk.text)),
                        None,
                    )
                    rr.append(1.0 / rank if rank else 0.0)
                    hit1 += rank == 1
                    hitk += rank is not None
                n = len(usable)
                rows.append((mode, sum(rr) / n, hit1 / n, hitk / n, sorted(times)[len(times) // 2]))
        finally:
            await c.close()
    header = f"{'mode':<10}{'MRR@' + str(k):>9}{'hit@1':>8}{'hit@' + str(k):>8}{'p50 ms':>9}"
    print(header)
    print("-" * len(header))
    for mode, mrr, h1, hk, p50 in rows:
        print(f"{mode:<10}{mrr:9.3f}{h1:8.2f}{hk:8.2f}{p50:9.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    import logging

    logging.disable(logging.WARNING)
    asyncio.run(run(args.k))


if __name__ == "__main__":
    main()
