"""A corpus of distinct PDFs made from the two real papers in shared/data/pdfs (bulk-ingest tests and
benchmarks/bench_ingest.py).

Copy ``i`` is a new title page (its own title, in the largest font, and a line naming the copy) followed by
``pages`` consecutive pages of one source paper, starting at a page that moves with ``i``; its metadata title
is its own too. So every copy has its own content hash, its own title and mostly its own page range, and
none prints the source's arXiv stamp on its first page (which would merge the copies into one paper).
"""

from __future__ import annotations

from pathlib import Path


def make_corpus(shared_pdfs: Path, out_dir: Path, count: int, pages: int = 4) -> list[Path]:
    import pymupdf

    out_dir.mkdir(parents=True, exist_ok=True)
    sources = sorted(shared_pdfs.glob("*.pdf"))
    opened = [pymupdf.open(str(p)) for p in sources]
    made: list[Path] = []
    try:
        for i in range(count):
            src = opened[i % len(opened)]
            body_pages = src.page_count - 1  # page 1 (with the arXiv stamp) is never copied
            start = 1 + (i // len(opened) * 3) % max(1, body_pages - pages + 1)
            doc = pymupdf.open()
            title_page = doc.new_page()
            title = f"Ingest corpus paper {i:04d}: {sources[i % len(sources)].stem} pages {start + 1}-{start + pages}"
            title_page.insert_text((72, 100), title, fontsize=18)
            title_page.insert_text((72, 140), f"Copy {i} made for the bulk-ingest tests from a real paper.", fontsize=10)
            doc.insert_pdf(src, from_page=start, to_page=min(src.page_count - 1, start + pages - 1))
            doc.set_metadata({"title": title, "author": "Ingest Corpus"})
            target = out_dir / f"paper-{i:04d}.pdf"
            doc.save(str(target))
            doc.close()
            made.append(target)
    finally:
        for doc in opened:
            doc.close()
    return made


async def library_snapshot(home: Path) -> dict[str, list[tuple[str, str, str, tuple[float, ...] | None]]]:
    """What a library holds, comparable across libraries: per paper title (state 'parsed' only), its
    chunks in order as (section, part, text, vector or None) in the embedding space in use."""
    from astro_jupyter.config import AstroConfig
    from astro_jupyter.services.container import ServiceContainer

    services = ServiceContainer(AstroConfig(home=str(home)))
    await services.start()
    try:
        vectors: dict[int, tuple[float, ...]] = {}
        for space in await services.chunks.spaces():
            ids, matrix = await services.chunks.load_vectors(space)
            vectors.update((int(i), tuple(float(x) for x in row)) for i, row in zip(ids, matrix))
        out = {}
        for paper in await services.library.list(limit=100_000):
            if paper.state != "parsed":
                continue
            out[paper.title] = [(c.section, c.part, c.text, vectors.get(c.id))
                                for c in await services.chunks.for_paper(paper.id)]
        return out
    finally:
        await services.close()
