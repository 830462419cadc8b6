"""The library's repositories (store/repository.py), the same tests on every backend: SQLite (the user's
own astro.db), PostgreSQL without pgvector (Debian's server: vectors as float32 bytes) and PostgreSQL with
pgvector (the pgserver wheel's server). Each PostgreSQL test gets a new database on a real server
the session started (tests/store/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest

from astro_jupyter.errors import NotFoundError, StoreError
from astro_jupyter.services.container import ServiceContainer
from astro_jupyter.services.parse.chunking import Chunk
from astro_jupyter.store.papers import PaperRecord
from astro_jupyter.store.repository import ChunkStore, PaperStore

pytestmark = pytest.mark.asyncio


async def _paper_with_chunks(c: ServiceContainer, pid: str, texts: list[tuple[str, str]], *,
                             part: str = "body") -> list[int]:
    await c.library.papers.insert(PaperRecord(id=pid, title=f"Title of {pid}", state="parsed"))
    chunks = [Chunk(i, sec, part, i + 1, i + 1, text) for i, (sec, text) in enumerate(texts)]
    ids = await c.chunks.replace(pid, chunks)
    await c.rag.embed_chunks(await c.chunks.for_paper(pid))
    return ids


async def _two_papers(c: ServiceContainer) -> None:
    await _paper_with_chunks(c, "local:halo", [
        ("1 Introduction", "Dwarf galaxies are dominated by dark matter."),
        ("3 Results", "The dark matter halo follows a cored Burkert profile rather than a cusp."),
        ("4 Conclusions", "Cored profiles describe the sample best."),
    ])
    await _paper_with_chunks(c, "local:pulsar", [
        ("1 Introduction", "Millisecond pulsars are spun up by accretion from a companion star."),
        ("2 Timing", "Pulsar timing arrays search for nanohertz gravitational waves."),
    ])


async def test_the_container_builds_the_configured_backend(library: ServiceContainer, library_backend: str) -> None:
    assert isinstance(library.library.papers, PaperStore) and isinstance(library.chunks, ChunkStore)
    shared = type(library.chunks).__module__.endswith("pg_library")
    assert shared == (library_backend != "sqlite")
    assert library.library.papers is library.paper_store


async def test_papers_crud_and_lookups(library: ServiceContainer) -> None:
    papers = library.library.papers
    rec = PaperRecord(id="arXiv:2101.00001", arxiv_id="2101.00001", doi="10.1000/ABC", title="A paper",
                      authors=["Ada", "Bo"], keywords=["x"], year=2021, metadata={"sha256": "f00d"})
    stored = await papers.insert(rec)
    assert stored.title == "A paper" and stored.authors == ["Ada", "Bo"] and stored.state == "metadata"
    assert stored.created_at and stored.updated_at
    assert (await papers.find_by(doi="10.1000/abc")).id == rec.id  # DOIs case-insensitively
    assert (await papers.find_by(arxiv_id="2101.00001")).id == rec.id
    assert await papers.find_by(bibcode="nope") is None
    assert (await papers.find_by_sha256("f00d")).id == rec.id
    many = await papers.find_many(arxiv_ids=[], dois=["10.1000/abc"], bibcodes=["x"])
    assert [p.id for p in many] == [rec.id]
    updated = await papers.update(rec.id, state="downloaded", pdf_path="/x.pdf", metadata={"pages": 3})
    assert updated.state == "downloaded" and updated.metadata == {"pages": 3}
    with pytest.raises(ValueError):
        await papers.update(rec.id, bogus=1)
    with pytest.raises(NotFoundError):
        await papers.update("local:none", title="x")
    await papers.insert(PaperRecord(id="local:b", title="B"))
    assert await papers.count() == 2
    assert await papers.count_by_state() == {"downloaded": 1, "metadata": 1}
    assert [p.id for p in await papers.list(state="metadata")] == ["local:b"]
    assert {p.id for p in await papers.list()} == {rec.id, "local:b"}
    assert await papers.delete("local:b") and not await papers.delete("local:b")
    assert await papers.find("local:b") is None


async def test_a_second_insert_of_the_same_identifier_is_refused(library: ServiceContainer) -> None:
    papers = library.library.papers
    await papers.insert(PaperRecord(id="arXiv:2101.00002", arxiv_id="2101.00002"))
    with pytest.raises(StoreError):
        await papers.insert(PaperRecord(id="arXiv:2101.00002v2", arxiv_id="2101.00002"))
    with pytest.raises(StoreError):
        await papers.insert(PaperRecord(id="arXiv:2101.00002"))
    assert await papers.count() == 1


async def test_chunks_replace_read_and_full_text(library: ServiceContainer) -> None:
    await _two_papers(library)
    chunks = library.chunks
    assert await chunks.count() == 5 and await chunks.count("local:pulsar") == 2
    rows = await chunks.for_paper("local:halo")
    assert [r.section for r in rows] == ["1 Introduction", "3 Results", "4 Conclusions"]
    got = await chunks.get_many([rows[1].id])
    assert got[rows[1].id].title == "Title of local:halo" and got[rows[1].id].pages == "p. 2"
    best = await chunks.fts('"cored" OR "Burkert"', 5)
    assert best[0][0] == rows[1].id and all(score <= 0 for _, score in best)  # negated, like FTS5's bm25
    assert [i for i, _ in await chunks.fts('"pulsar"', 5, paper_ids=["local:halo"])] == []
    # references are stored but never searchable
    await chunks.replace("local:pulsar", [Chunk(0, "References", "references", 9, 9, "Pulsar catalogue 2005")])
    assert await chunks.fts('"catalogue"', 5) == []
    assert await chunks.searchable_count() == 3 and await chunks.count() == 4
    assert await chunks.ids_for_papers(["local:pulsar"]) == []


async def test_vectors_store_load_and_missing(library: ServiceContainer) -> None:
    await _two_papers(library)
    space = await library.rag.space()
    assert await library.chunks.vector_count(space) == 5
    ids, matrix = await library.chunks.load_vectors(space)
    stored = [r.id for p in ("local:halo", "local:pulsar") for r in await library.chunks.for_paper(p)]
    assert sorted(ids.tolist()) == sorted(stored)
    assert matrix.shape == (5, space.dim) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    assert await library.chunks.missing_vectors(space) == []
    assert await library.chunks.replace("local:new", []) == []
    await library.library.papers.insert(PaperRecord(id="local:new", title="New"))
    await library.chunks.replace("local:new", [Chunk(0, "1 Intro", "body", 1, 1, "Magnetars")])
    assert [c.text for c in await library.chunks.missing_vectors(space)] == ["Magnetars"]
    assert [s.name for s in await library.chunks.spaces()] == [space.name]


async def test_hybrid_search_ranks_and_filters(library: ServiceContainer) -> None:
    await _two_papers(library)
    hits = await library.rag.search("cored dark matter halo profile", 3)
    assert hits[0].chunk.paper_id == "local:halo" and hits[0].chunk.section == "3 Results"
    assert hits[0].vector_rank == 1 and hits[0].fts_rank == 1
    only = await library.rag.search("dark matter", 5, paper_ids=["local:pulsar"])
    assert {h.chunk.paper_id for h in only} == {"local:pulsar"}
    fts_only = await library.rag.search("gravitational waves", 2, mode="fts")
    assert fts_only[0].chunk.section == "2 Timing" and fts_only[0].vector_rank is None
    vec_only = await library.rag.search("gravitational waves", 2, mode="vector")
    assert vec_only[0].chunk.section == "2 Timing" and vec_only[0].fts_rank is None
    assert isinstance(await library.rag.search('"pulsar" AND (NEAR(x y) OR *', 3), list)  # hostile text


async def test_index_follows_inserts_and_deletes(library: ServiceContainer) -> None:
    await _two_papers(library)
    rag = library.rag
    await rag.search("pulsar", 1)
    loads = rag.index.loads
    new = await _paper_with_chunks(library, "local:new", [("1 Intro", "Fast radio bursts from magnetars.")])
    assert (await rag.search("fast radio bursts magnetars", 1, mode="vector"))[0].chunk.id == new[0]
    rag.forget(await library.chunks.removed_ids("local:new"))
    await library.chunks.replace("local:new", [])
    hits = await rag.search("fast radio bursts magnetars", 5, mode="vector")
    assert new[0] not in [h.chunk.id for h in hits]
    assert rag.index.loads == loads


async def test_removing_a_paper_takes_its_passages_out_of_search(library: ServiceContainer) -> None:
    await _two_papers(library)
    removed = await library.parser.remove("local:pulsar")
    assert removed[1] == 2 and await library.library.find("local:pulsar") is None
    assert await library.chunks.count() == 3
    hits = await library.rag.search("millisecond pulsars accretion", 5)
    assert all(h.chunk.paper_id == "local:halo" for h in hits)
