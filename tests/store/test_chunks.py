"""paper_chunks + FTS + per-space vector tables."""

from __future__ import annotations

import numpy as np
import pytest

from astro_jupyter.errors import StoreError
from astro_jupyter.services.container import ServiceContainer
from astro_jupyter.services.parse.chunking import Chunk
from astro_jupyter.store.chunks import space_name
from astro_jupyter.store.papers import PaperRecord


async def _paper(services: ServiceContainer, pid: str = "local:p1") -> str:
    await services.library.papers.insert(PaperRecord(id=pid, title=f"Paper {pid}", state="downloaded"))
    return pid


def _chunks(n: int, section: str = "1 Intro", part: str = "body") -> list[Chunk]:
    return [Chunk(i, section, part, i + 1, i + 1, f"chunk {i} about quasar number {i}") for i in range(n)]


@pytest.mark.asyncio
async def test_replace_and_read_back(services: ServiceContainer) -> None:
    pid = await _paper(services)
    repo = services.chunks
    ids = await repo.replace(pid, _chunks(3) + [Chunk(3, "References", "references", 4, 4, "[1] A. Author 2020")])
    assert len(ids) == 4
    rows = await repo.for_paper(pid)
    assert [r.seq for r in rows] == [0, 1, 2, 3] and rows[3].part == "references"
    assert rows[0].pages == "p. 1"
    got = await repo.get_many(ids[:2])
    assert got[ids[0]].title == "Paper local:p1"
    # replacing drops the old rows (and FTS entries)
    await repo.replace(pid, _chunks(1))
    assert await repo.count(pid) == 1
    remaining = await repo.for_paper(pid)
    assert [i for i, _ in await repo.fts('"quasar"', 10)] == [remaining[0].id]


@pytest.mark.asyncio
async def test_a_replace_that_fails_midway_keeps_the_old_chunks_and_their_vectors(services: ServiceContainer) -> None:
    """replace runs as one transaction (in one hop): a bad chunk among good ones leaves the paper as it was."""
    pid = await _paper(services)
    repo = services.chunks
    ids = await repo.replace(pid, _chunks(3))
    space = await repo.ensure_space("lexical-v2", 4)
    await repo.put_vectors(space, ids, np.eye(3, 4, dtype=np.float32))
    duplicate_seq = _chunks(2) + [Chunk(1, "2 Data", "body", 3, 3, "the same seq twice: UNIQUE (paper_id, seq)")]
    with pytest.raises(StoreError, match="UNIQUE"):
        await repo.replace(pid, duplicate_seq)
    assert [r.id for r in await repo.for_paper(pid)] == ids
    stored_ids, matrix = await repo.load_vectors(space)
    assert sorted(stored_ids.tolist()) == ids and matrix.shape == (3, 4)
    assert [i for i, _ in await repo.fts('"quasar"', 10)] != []  # the full-text rows were kept too
    fresh = await repo.replace(pid, _chunks(2))  # and the next replace works (no transaction left open)
    assert len(fresh) == 2 and await repo.vector_count(space) == 0


@pytest.mark.asyncio
async def test_fts_excludes_references_and_filters_papers(services: ServiceContainer) -> None:
    a = await _paper(services, "local:a")
    b = await _paper(services, "local:b")
    await services.chunks.replace(a, _chunks(2) + [Chunk(2, "References", "references", 3, 3, "quasar reference list")])
    await services.chunks.replace(b, _chunks(2))
    all_hits = await services.chunks.fts('"quasar"', 10)
    assert len(all_hits) == 4  # the reference chunk is not searchable as body text
    only_b = await services.chunks.fts('"quasar"', 10, paper_ids=[b])
    rows = await services.chunks.get_many([i for i, _ in only_b])
    assert {r.paper_id for r in rows.values()} == {b}


@pytest.mark.asyncio
async def test_vector_spaces_per_backend_and_missing_after_switch(services: ServiceContainer) -> None:
    pid = await _paper(services)
    repo = services.chunks
    ids = await repo.replace(pid, _chunks(4))
    space = await repo.ensure_space("lexical-v2", 8)
    assert space.name == space_name("lexical-v2", 8) == "paper_chunk_vec_lexical_v2_8"
    assert space.kind == ("vec0" if services.db.info.vec_available else "blob")
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(4, 8)).astype(np.float32)
    await repo.put_vectors(space, ids, matrix)
    loaded_ids, loaded = await repo.load_vectors(space)
    order = np.argsort(loaded_ids)
    assert list(loaded_ids[order]) == ids and np.allclose(loaded[order], matrix)
    assert await repo.missing_vectors(space) == []
    # deleted rows leave holes in vec0's chunk blobs: the fast loader must skip them
    await services.db.execute(f"DELETE FROM {space.name} WHERE rowid = ?", (ids[1],))
    loaded_ids, loaded = await repo.load_vectors(space)
    assert sorted(loaded_ids.tolist()) == [ids[0], ids[2], ids[3]]
    for i, row in zip(loaded_ids.tolist(), loaded):
        assert np.allclose(row, matrix[ids.index(i)])
    await repo.put_vectors(space, [ids[1]], matrix[1:2])
    # a new backend: a new table, and every chunk is missing there
    other = await repo.ensure_space("endpoint:text-embedding-3-small", 16)
    assert other.name != space.name
    assert [c.id for c in await repo.missing_vectors(other)] == ids
    assert {s.name for s in await repo.spaces()} == {space.name, other.name}
    # replacing a paper's chunks removes their vectors in every space
    await repo.replace(pid, _chunks(1))
    assert await repo.vector_count(space) == 0


@pytest.mark.asyncio
async def test_vec0_knn_matches_numpy(services: ServiceContainer) -> None:
    if not services.db.info.vec_available:
        pytest.skip("sqlite-vec not loadable with this driver")
    pid = await _paper(services)
    ids = await services.chunks.replace(pid, _chunks(50))
    space = await services.chunks.ensure_space("test", 8)
    rng = np.random.default_rng(1)
    matrix = rng.normal(size=(50, 8)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    await services.chunks.put_vectors(space, ids, matrix)
    q = matrix[7] + 0.1
    q /= np.linalg.norm(q)
    got = [i for i, _ in await services.chunks.knn(space, q, 5)]
    want = [ids[i] for i in np.argsort(-(matrix @ q))[:5]]
    assert got == want
    restricted = [i for i, _ in await services.chunks.knn(space, q, 3, restrict=ids[10:20])]
    assert set(restricted) <= set(ids[10:20]) and len(restricted) == 3
