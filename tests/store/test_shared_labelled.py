"""The shared library ranks the labelled retrieval set (tests/data/retrieval_labelled.json) like the SQLite
library: the same chunks in both, hybrid search for every question, top 3 compared.

The shared library's BM25 reads word → chunk postings tokenized by FTS5's own tokenizer
(store/fts_terms.py), so both libraries score every chunk alike: the same top 3 in 42 of 42 questions,
hit@3 36 and 36. Before (BM25 over PostgreSQL's tsvector, whose parser splits "1.5", "H-alpha" and accented
words differently, and one term per stem where FTS5 scores every phrase) it was 29 of 42; with ``ts_rank``
9 of 42."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from astro_jupyter.services.parse.chunking import Chunk
from astro_jupyter.store.papers import PaperRecord
from tests.conftest import SHARED_PDFS

ROOT = Path(__file__).resolve().parents[2]
DATA = json.loads((ROOT / "tests" / "data" / "retrieval_labelled.json").read_text("utf-8"))


def _locate(name: str, tmp: Path) -> Path | None:
    if (SHARED_PDFS / name).is_file():
        return SHARED_PDFS / name
    from benchmarks.bench_retrieval_labelled import locate

    return locate(name, tmp)


@pytest.mark.asyncio
async def test_hybrid_top3_on_the_labelled_set_matches_sqlite(make_database, make_container, tmp_path) -> None:
    from benchmarks.bench_retrieval_labelled import relevant

    paths = {name: _locate(name, tmp_path) for name in DATA["documents"]}
    if any(p is None for p in paths.values()):
        pytest.skip(f"labelled documents not on this machine: {[n for n, p in paths.items() if p is None]}")
    sqlite = await make_container("")
    shared = await make_container(make_database("postgres"))
    ids = {}
    for name, path in paths.items():
        record = await sqlite.library.add_pdf(path, fetch=False)
        await sqlite.parser.parse(record.id)
        ids[name] = record.id
        await shared.library.papers.insert(PaperRecord(id=record.id, title=record.title, state="parsed"))
        rows = await sqlite.chunks.for_paper(record.id)
        await shared.chunks.replace(record.id, [Chunk(r.seq, r.section, r.part, r.page_start, r.page_end, r.text)
                                                for r in rows])
        await shared.rag.embed_chunks(await shared.chunks.for_paper(record.id))
    differ, hit3 = [], {"sqlite": 0, "shared": 0}
    for item in DATA["questions"]:
        tops = {}
        for key, c in (("sqlite", sqlite), ("shared", shared)):
            hits = (await c.rag.search(item["q"], 10))[:3]
            tops[key] = [(h.chunk.paper_id, h.chunk.seq) for h in hits]
            hit3[key] += any(relevant(h.chunk, ids[item["doc"]], item["sections"]) for h in hits)
        if tops["sqlite"] != tops["shared"]:
            differ.append((item["q"], tops))
    n = len(DATA["questions"])
    assert not differ, f"the same top 3 in only {n - len(differ)}/{n} questions: {differ}"
    assert hit3["sqlite"] == hit3["shared"], hit3
