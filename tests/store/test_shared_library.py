"""What sharing adds, on real PostgreSQL servers: several users (each a container with its own home and
SQLite store) on one library — one copy and one parse per paper, "being parsed" seen by all, who may
remove, each user's search index following the others' writes, migrations that do not block readers,
and a clear message (personal work going on) when the database is down."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from astro_jupyter.errors import PermissionDenied
from astro_jupyter.store.pg import PgDatabase, PgMigration, SharedLibraryUnavailable, load_pg_migrations
from astro_jupyter.store.pg_library import PgChunkRepository

PDFS = Path(__file__).resolve().parents[1] / "data" / "pdfs"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["postgres", "pgvector"])
def shared_url(request: pytest.FixtureRequest, make_database) -> str:
    return make_database(request.param)


@pytest.mark.asyncio
async def test_two_users_adding_the_same_paper_at_once_store_one_copy(shared_url: str, make_container) -> None:
    alice, bob = await make_container(shared_url, user="alice"), await make_container(shared_url, user="bob")
    pdf = str(PDFS / "aas_style.pdf")
    a, b = await asyncio.gather(alice.library.add(pdf, fetch=False), bob.library.add(pdf, fetch=False))
    assert a.id == b.id and await alice.library.papers.count() == 1
    stored = await bob.library.get(a.id)
    assert stored.added_by in ("alice", "bob") and Path(stored.pdf_path).parent == Path(alice.config.papers_dir)
    assert Path(stored.pdf_path).read_bytes() == (PDFS / "aas_style.pdf").read_bytes()
    # the same identifier from both at once: one row
    from astro_jupyter.store.papers import PaperRecord

    recs = await asyncio.gather(*(c.library.store(PaperRecord(arxiv_id="2101.00001", title=f"by {c.paper_store.user}"))
                                  for c in (alice, bob, alice, bob)))
    assert len({r.id for r in recs}) == 1 and await alice.library.papers.count() == 2


@pytest.mark.asyncio
async def test_a_paper_is_parsed_once_and_shows_as_being_parsed_meanwhile(shared_url: str, make_container) -> None:
    alice, bob = await make_container(shared_url, user="alice"), await make_container(shared_url, user="bob")
    record = await alice.library.add(str(PDFS / "many_pages.pdf"), fetch=False)
    seen_by_bob: list[str] = []

    async def progress(**info: object) -> None:
        seen_by_bob.append((await bob.library.get(record.id)).parsing)

    first, second = await asyncio.gather(alice.parser.parse(record.id, progress), bob.parser.parse(record.id))
    assert seen_by_bob and set(seen_by_bob) == {"alice"}
    assert first.embedded > 0 and second.embedded == 0  # bob waited, then took alice's parse
    assert second.chunks == first.chunks and second.markdown_path == first.markdown_path
    assert await bob.chunks.count(record.id) == first.chunks + first.references_chunks
    assert (await bob.library.get(record.id)).parsing == "" and (await bob.library.get(record.id)).state == "parsed"


@pytest.mark.asyncio
async def test_only_the_adder_or_an_admin_removes_a_paper(shared_url: str, make_container) -> None:
    alice = await make_container(shared_url, user="alice")
    bob = await make_container(shared_url, user="bob")
    carol = await make_container(shared_url, user="carol")
    mine = await alice.library.add(str(PDFS / "aas_style.pdf"), fetch=False)
    await alice.parser.parse(mine.id)
    chunks = await alice.chunks.count(mine.id)
    assert (await bob.library.get(mine.id)).added_by == "alice"
    with pytest.raises(PermissionDenied, match="added to the shared library by alice"):
        await bob.parser.remove(mine.id)
    assert await bob.chunks.count(mine.id) == chunks and Path(mine.pdf_path).is_file()  # nothing went
    with pytest.raises(PermissionDenied):
        await bob.library.papers.delete(mine.id)
    await alice.shared_library.execute("INSERT INTO library_admins (username) VALUES ('carol')")
    record, removed = await carol.parser.remove(mine.id)
    assert removed == chunks and await carol.chunks.count(mine.id) == 0 and await alice.library.find(mine.id) is None
    assert not Path(mine.pdf_path).exists()
    again = await bob.library.add(str(PDFS / "aas_style.pdf"), fetch=False)
    assert again.added_by == "bob"
    await bob.parser.remove(again.id)  # the adder may


@pytest.mark.asyncio
@pytest.mark.parametrize("product", ["inline", "worker"])
async def test_each_users_index_follows_the_others_writes(shared_url: str, make_container, product: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Small products run inline after following; large ones (``worker``) in a thread while following."""
    from astro_jupyter.services import vector_index
    from tests.store.test_library_repository import _paper_with_chunks, _two_papers

    if product == "worker":
        monkeypatch.setattr(vector_index, "INLINE_MAX", 0)

    alice, bob = await make_container(shared_url, user="alice"), await make_container(shared_url, user="bob")
    await _two_papers(alice)
    assert (await bob.rag.search("millisecond pulsars", 1))[0].chunk.paper_id == "local:pulsar"
    loads = bob.rag.index.loads
    new = await _paper_with_chunks(alice, "local:frb", [("1 Intro", "Fast radio bursts from magnetars.")])
    hit = (await bob.rag.search("fast radio bursts magnetars", 1, mode="vector"))[0]
    assert hit.chunk.id == new[0]
    await alice.parser.remove("local:frb")
    hits = await bob.rag.search("fast radio bursts magnetars", 5, mode="vector")
    assert new[0] not in [h.chunk.id for h in hits]
    assert bob.rag.index.loads == loads  # followed, never reloaded


@pytest.mark.asyncio
async def test_pgvector_knn_exact_and_hnsw(make_database, make_container) -> None:
    c = await make_container(make_database("pgvector"))
    from tests.store.test_library_repository import _two_papers

    await _two_papers(c)
    space = await c.rag.space()
    assert space.kind == "pgvector" and c.shared_library.vector.available
    q = (await c.rag.embedder.embed(["pulsar timing gravitational waves"]))[0]
    memory = await c.rag.index.search(space, q, 5)
    for exact in (True, False):
        got = await c.chunks.knn(space, q, 5, exact=exact)
        assert [i for i, _ in got] == [i for i, _ in memory]
        assert [1 - d for _, d in got] == pytest.approx([s for _, s in memory], abs=1e-5)
    only = await c.chunks.knn(space, q, 5, restrict=[memory[-1][0]], exact=True)
    assert [i for i, _ in only] == [memory[-1][0]]


@pytest.mark.asyncio
async def test_without_pgvector_vectors_are_float32_bytes_and_older_real_array_spaces_still_work(
        make_database, make_container) -> None:
    """Without pgvector a new space stores float32 bytes: what the other users' searches follow is copied out as
    stored (a ``real[]`` went through ``array_send``, the largest share of PostgreSQL's time in a search with ten
    users adding). A space an earlier version made (``real[]``) is still written, loaded and followed."""
    from tests.store.test_library_repository import _two_papers

    url = make_database("postgres")
    alice, bob = await make_container(url, user="alice"), await make_container(url, user="bob")
    await _two_papers(alice)
    space = await alice.rag.space()
    assert space.kind == "float32" and not alice.shared_library.vector.available
    assert "no pgvector" in alice.shared_library.vector.describe()
    assert await alice.shared_library.fetchval(
        f"SELECT pg_typeof(embedding)::text || ' ' || octet_length(embedding) FROM {space.name} LIMIT 1") \
        == f"bytea {4 * space.dim}"
    hits = await bob.rag.search("pulsar timing arrays", 3, mode="vector")
    assert hits and hits[0].chunk.paper_id == "local:pulsar"

    # a real[] space an earlier version made, e.g. for another embedding backend
    await alice.shared_library.execute(
        "CREATE TABLE paper_chunk_vec_older_4 (chunk_id bigint PRIMARY KEY REFERENCES paper_chunks (id) ON DELETE"
        " CASCADE, embedding real[] NOT NULL, xid xid8 NOT NULL DEFAULT pg_current_xact_id())")
    await alice.shared_library.execute(
        "INSERT INTO embedding_spaces (name, backend, dim, kind) VALUES ('paper_chunk_vec_older_4', 'older', 4, 'array')")
    older = await alice.chunks.ensure_space("older", 4)
    assert older.kind == "array"
    ids = await alice.chunks.ids_for_papers(["local:halo", "local:pulsar"])
    mark = await bob.chunks.vector_mark()
    vectors = np.eye(len(ids), 4, dtype=np.float32) + 0.25
    await alice.chunks.put_vectors(older, ids[:2], vectors[:2])
    loaded_ids, loaded = await bob.chunks.load_vectors(older)
    assert loaded_ids.tolist() == ids[:2] and np.array_equal(loaded, vectors[:2])
    await alice.chunks.put_vectors(older, ids[2:], vectors[2:])
    got, rows, removed, _ = await bob.chunks.changes_since(older, mark)
    assert got.tolist() == ids and np.array_equal(rows, vectors) and removed == []


@pytest.mark.asyncio
async def test_a_migration_on_a_live_database_does_not_block_readers(make_database) -> None:
    url = make_database("postgres")
    first = PgDatabase(url)
    await first.pool()  # migrated to the current version, in use
    async with first.acquire() as reader:
        tx = reader.transaction()
        await tx.start()
        await reader.fetch("SELECT * FROM papers")  # a long read: holds its table lock until it ends
        later = PgDatabase(url, migrations=[*load_pg_migrations(), PgMigration(
            9001, "add_a_column", "ALTER TABLE papers ADD COLUMN reading_list text NOT NULL DEFAULT ''")])
        migrating = asyncio.ensure_future(later.pool())
        try:
            for _ in range(20):  # readers keep reading while the migration waits for its lock
                assert await asyncio.wait_for(first.fetchval("SELECT count(*) FROM papers"), 5) == 0
            assert not migrating.done()
        finally:
            await tx.commit()
        await asyncio.wait_for(migrating, 30)
    assert await later.fetchval("SELECT max(version) FROM schema_version") == 9001
    assert await first.fetchval("SELECT count(*) FROM information_schema.columns WHERE column_name = 'reading_list'") == 1
    await first.close()
    await later.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.asyncio
async def test_an_unreachable_shared_library_leaves_personal_work_going(make_container) -> None:
    url = f"postgresql://nobody:secret@127.0.0.1:{_closed_port()}/library"
    c = await make_container(url)
    session = await c.sessions.create(title="still mine")  # the user's own store works
    assert (await c.sessions.find(session.id)).title == "still mine"
    with pytest.raises(SharedLibraryUnavailable) as caught:
        await c.library.list()
    message = str(caught.value)
    assert "unreachable" in message and "Your own sessions, notes and memories" in message
    assert "secret" not in message  # the password is not repeated
    with pytest.raises(SharedLibraryUnavailable):
        await c.rag.search("anything", 3, mode="fts")


def test_doctor_says_how_vectors_are_stored_and_when_the_library_is_down(make_database, tmp_path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "ASTRO_HOME": str(tmp_path / "home"),
           "ASTRO_EMBED_MODEL": "lexical", "HF_HUB_OFFLINE": "1"}
    for kind, want in (("postgres", "float32 vectors"), ("pgvector", "pgvector")):
        env["ASTRO_SHARED_LIBRARY_URL"] = make_database(kind)
        out = subprocess.run([sys.executable, "-m", "astro_jupyter.cli", "doctor"], env=env, capture_output=True,
                             text=True, timeout=120, cwd=ROOT)
        line = next(x for x in out.stdout.splitlines() if x.strip().startswith("vectors:"))
        assert want in line, out.stdout
        report = json.loads(subprocess.run([sys.executable, "-m", "astro_jupyter.cli", "doctor", "--json"], env=env,
                                           capture_output=True, text=True, timeout=120, cwd=ROOT).stdout)
        assert report["shared_library"]["pgvector"] == (kind == "pgvector")
    env["ASTRO_SHARED_LIBRARY_URL"] = f"postgresql://127.0.0.1:{_closed_port()}/x"
    out = subprocess.run([sys.executable, "-m", "astro_jupyter.cli", "doctor"], env=env, capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert "Shared library UNREACHABLE" in out.stdout and "SQLite" in out.stdout
    listing = subprocess.run([sys.executable, "-m", "astro_jupyter.cli", "library", "list"], env=env,
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert listing.returncode != 0 and "unreachable" in listing.stderr and "Traceback" not in listing.stderr


def test_vector_matrix_roundtrip_is_float32() -> None:
    """The array path builds the same float32 matrix the SQLite blob path does."""
    repo = PgChunkRepository.__new__(PgChunkRepository)
    from astro_jupyter.store.chunks import Space

    ids, m = repo._matrix(Space("t", "x", 3, "array"), [(7, [0.5, 0.25, 1.0])])
    assert ids.tolist() == [7] and m.dtype == np.float32 and m.tolist() == [[0.5, 0.25, 1.0]]


@pytest.mark.asyncio
async def test_notes_on_shared_papers_stay_in_each_users_own_store(make_database, make_container) -> None:
    url = make_database("postgres")
    alice, bob = await make_container(url, user="alice"), await make_container(url, user="bob")
    paper = await alice.library.add(str(PDFS / "aas_style.pdf"), fetch=False)
    note = await alice.notes.save(paper.id, comment="the tidal tails are the point", owner="alice")
    assert note.paper_id == paper.id and [n.comment for n in await alice.notes.list(paper.id)] == [note.comment]
    assert await bob.notes.list(paper.id) == []  # the library is shared, notes are not
    assert (await bob.library.get(paper.id)).added_by == "alice"


def test_binary_real_arrays_decode_to_float32() -> None:
    import struct

    from astro_jupyter.errors import StoreError
    from astro_jupyter.store.pg_library import _float4_arrays

    values = np.array([0.5, -0.25, 3.0], np.float32)
    wire = struct.pack(">iiiii", 1, 0, 700, 3, 1) + b"".join(struct.pack(">if", 4, v) for v in values)
    assert _float4_arrays([wire], 3)[0].tolist() == values.tolist()
    with pytest.raises(StoreError):
        _float4_arrays([wire], 4)
    # many at once (what a search reads after other users' writes), a null element refused
    other = struct.pack(">iiiii", 1, 0, 700, 3, 1) + b"".join(struct.pack(">if", 4, v) for v in -values)
    assert _float4_arrays([wire, other], 3).tolist() == [values.tolist(), (-values).tolist()]
    null = struct.pack(">iiiii", 1, 1, 700, 3, 1) + struct.pack(">if", 4, 1.0) + struct.pack(">i", -1) * 2
    with pytest.raises(StoreError):
        _float4_arrays([wire, null], 3)


def test_the_two_shared_library_settings_move_the_papers_and_only_take_a_postgresql_url(tmp_path: Path) -> None:
    """``shared_library_url`` + ``shared_library_dir``: PDFs and Markdown live in the shared directory (the
    SQLite store stays in the user's home); the URL must be PostgreSQL's, else a clear error."""
    from traitlets import TraitError

    from astro_jupyter.config import AstroConfig

    home, shared = tmp_path / "home", tmp_path / "shared"
    mine = AstroConfig(home=str(home))
    assert mine.papers_dir == home / "papers"
    hub = AstroConfig(home=str(home), shared_library_url="postgresql://astro@db/lib", shared_library_dir=str(shared))
    assert hub.papers_dir == shared and hub.db_path == home / "astro.db"
    assert hub.staging_dir.is_relative_to(shared)  # partial downloads move in atomically: same filesystem
    with pytest.raises(TraitError, match="postgresql://"):
        AstroConfig(home=str(home), shared_library_url="mysql://astro@db/lib")


@pytest.mark.asyncio
async def test_following_reads_each_write_once_while_another_writer_is_mid_transaction(shared_url: str,
                                                                                      make_container) -> None:
    """While some user's write is open, the snapshot's xmin stays behind it; a search following the others'
    writes gets what they committed meanwhile once, not again at every search (ten users adding papers:
    thousands of vectors each time)."""
    import asyncpg

    from astro_jupyter.store.papers import PaperRecord

    alice, bob = await make_container(shared_url, user="alice"), await make_container(shared_url, user="bob")
    space = await bob.chunks.ensure_space("lexical-v2", 8)
    mark = await bob.chunks.vector_mark()
    open_writer = await asyncpg.connect(shared_url)  # a third user mid-parse: a transaction with an xid, open
    try:
        await open_writer.execute("BEGIN")
        await open_writer.execute("SELECT pg_current_xact_id()")
        await alice.library.papers.insert(PaperRecord(id="local:a", title="a", state="parsed"))
        from astro_jupyter.services.parse.chunking import Chunk

        ids = await alice.chunks.replace("local:a", [Chunk(n, "1 Intro", "body", 1, 1, f"text {n}") for n in range(3)])
        await alice.chunks.put_vectors(space, ids, np.eye(3, 8, dtype=np.float32))
        got, rows, removed, mark = await bob.chunks.changes_since(space, mark)
        assert sorted(got.tolist()) == sorted(ids) and rows.shape == (3, 8) and removed == []
        got, rows, removed, mark = await bob.chunks.changes_since(space, mark)
        assert got.tolist() == [] and removed == []  # read once, though the xmin has not moved past them
        await alice.chunks.replace("local:a", [])  # removed: a tombstone, also reported once
        got, rows, removed, mark = await bob.chunks.changes_since(space, mark)
        assert got.tolist() == [] and sorted(removed) == sorted(ids)
        got, rows, removed, mark = await bob.chunks.changes_since(space, mark)
        assert got.tolist() == [] and removed == []
    finally:
        await open_writer.execute("ROLLBACK")
        await open_writer.close()


@pytest.mark.asyncio
async def test_a_search_after_another_users_write_is_three_round_trips(shared_url: str, make_container,
                                                                       monkeypatch) -> None:
    """Under ten users' load each round trip to the shared database waits its turn on busy cores (10–40 ms):
    a search asks only for the others' new vectors, the BM25 ranking (the library's statistics and whether any
    chunk waits for its postings in the same statement) and the passages — not the data version for the
    missing-vector look between its periodic runs, nor the statistics apart after each other user's write."""
    from tests.store.test_library_repository import _paper_with_chunks, _two_papers

    alice, bob = await make_container(shared_url, user="alice"), await make_container(shared_url, user="bob")
    await _two_papers(alice)
    await bob.rag.search("millisecond pulsars", 3)  # the first: loads the index, looks for missing vectors
    new = await _paper_with_chunks(alice, "local:frb", [("1 Intro", "Fast radio bursts from magnetars.")])
    statements: list[str] = []
    db = bob.shared_library
    for name in ("fetch", "fetchrow", "fetchval", "execute"):
        def counted(sql: str, *args: object, _real=getattr(db, name)) -> object:
            statements.append(sql)
            return _real(sql, *args)

        monkeypatch.setattr(db, name, counted)
    hits = await bob.rag.search("fast radio bursts magnetars", 3)
    assert hits[0].chunk.id == new[0] and hits[0].bm25 is not None and hits[0].similarity is not None
    assert len(statements) == 3, statements


@pytest.mark.asyncio
async def test_the_bm25_ranking_runs_beside_the_vector_ranking(shared_url: str, make_container, monkeypatch) -> None:
    """A search's full-text query is already in the database while its vector side runs (one after the other,
    the search waited for the sum of both on a busy machine)."""
    from tests.store.test_library_repository import _two_papers

    c = await make_container(shared_url)
    await _two_papers(c)
    await c.rag.search("millisecond pulsars", 3)
    fts_started = asyncio.Event()
    real_fts, real_vectors = c.chunks.fts, c.rag.index.search_floor

    async def fts(*args: object, **kwargs: object) -> object:
        fts_started.set()
        return await real_fts(*args, **kwargs)

    async def search_floor(*args: object, **kwargs: object) -> object:
        # one after the other, the full-text query started only once this had returned: here it times out,
        # and the search answers without its vector side
        await asyncio.wait_for(fts_started.wait(), 5)
        return await real_vectors(*args, **kwargs)

    monkeypatch.setattr(c.chunks, "fts", fts)
    monkeypatch.setattr(c.rag.index, "search_floor", search_floor)
    hits = await c.rag.search("millisecond pulsars", 3)
    assert c.rag.last_vector_error == ""
    assert hits[0].chunk.paper_id == "local:pulsar" and hits[0].bm25 is not None and hits[0].similarity is not None


@pytest.mark.asyncio
async def test_adding_a_paper_parses_tokenizes_and_embeds_below_the_searches_priority(shared_url: str, make_container,
                                                                                      monkeypatch) -> None:
    """On a hub one user's adds (PDF pages, word postings, passage embeddings) must not take the cores on equal
    terms from another user's search: that work runs on threads niced ``BACKGROUND_NICENESS`` above the
    process; the search's own question embedding does not."""
    import os
    import threading

    import astro_jupyter.services.parse as parse
    from astro_jupyter import background_cpu
    from astro_jupyter.services.embed import embed_query
    from astro_jupyter.store import fts_terms

    c = await make_container(shared_url)
    resolve = getattr(c.rag.embedder, "resolve", None)
    backend = await resolve() if resolve is not None else c.rag.embedder
    niceness: dict[str, list[int]] = {}
    loop_thread = threading.get_native_id()

    def spy(name: str, fn):
        def run(*args, **kwargs):
            tid = threading.get_native_id()
            if tid != loop_thread:  # lexical-v2 embeds up to 8 texts inline, on the event loop (≈ 2 ms)
                niceness.setdefault(name, []).append(os.getpriority(os.PRIO_PROCESS, tid))
            return fn(*args, **kwargs)
        return run

    monkeypatch.setattr(parse, "finish", spy("parse", parse.finish))
    monkeypatch.setattr(fts_terms, "chunk_terms", spy("postings", fts_terms.chunk_terms))
    monkeypatch.setattr(backend, "embed_many", spy("embed", backend.embed_many))
    process = os.getpriority(os.PRIO_PROCESS, 0)
    record = await c.library.add(str(PDFS / "many_pages.pdf"), fetch=False)
    result = await c.parser.parse(record.id)
    assert result.embedded > 8  # more than a query-sized batch (lexical-v2 embeds up to 8 texts inline)
    lowered = min(19, process + background_cpu.BACKGROUND_NICENESS)
    assert set(niceness) == {"parse", "postings", "embed"}, niceness
    assert all(n == lowered for values in niceness.values() for n in values), (process, niceness, backend.name)
    niceness.clear()
    await embed_query(backend, "millisecond pulsars")
    assert niceness.get("embed", [process]) == [process]  # a search's question: inline, or at the process's priority
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == process  # the event loop's thread untouched


@pytest.mark.asyncio
async def test_hnsw_index_only_for_a_space_too_large_for_memory(make_database, make_container) -> None:
    """Every write keeps an HNSW index up to date — most of PostgreSQL's CPU with ten users adding papers — so a
    space gets one only when the in-memory (exact) index cannot hold it and kNN runs in PostgreSQL."""
    from tests.store.test_library_repository import _two_papers
    from tests.waiting import until

    c = await make_container(make_database("pgvector"))
    await _two_papers(c)
    space = await c.rag.space()
    hnsw = f"{space.name}_hnsw"
    assert space.kind == "pgvector"
    assert await c.shared_library.fetchval("SELECT to_regclass($1)::text", hnsw) is None
    memory = [h.chunk.id for h in await c.rag.search("pulsar timing", 3, mode="vector")]

    small = await make_container(c.config.shared_library_url, user="bob")
    small.rag.index.max_rows = 1  # this user's index cannot hold the space: kNN in PostgreSQL
    hits = await small.rag.search("pulsar timing", 3, mode="vector")
    assert [h.chunk.id for h in hits] == memory  # exact meanwhile
    task = small.rag.index._ann_tasks[space.name]
    await until(task.done, what="the HNSW index build")
    assert task.result() is True
    assert await c.shared_library.fetchval(
        "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)", hnsw) is True
    hits = await small.rag.search("pulsar timing", 3, mode="vector")
    assert [h.chunk.id for h in hits] == memory  # through the index now (two papers: every row is a candidate)


@pytest.mark.asyncio
async def test_bulk_writes_take_turns_and_a_stalled_turn_delays_them_by_the_wait_at_most(
        make_database, make_container, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A paper's chunks and postings wait while another user's bulk write holds the turn (searches do not);
    they go in when it ends. A turn held too long (a client stalled mid-transaction) is waited for
    ``WRITE_TURN_WAIT_SECS`` and then written past."""
    from astro_jupyter.store import pg_library
    from tests.store.test_library_repository import _paper_with_chunks, _two_papers

    url = make_database("postgres")
    alice, bob = await make_container(url, user="alice"), await make_container(url, user="bob")
    await _two_papers(bob)
    assert (await alice.rag.search("millisecond pulsars", 1))[0].chunk.paper_id == "local:pulsar"

    async def writing_elsewhere(release: asyncio.Event) -> None:
        async with bob.shared_library.transaction() as conn:  # another user's write, in its turn
            await conn.execute("SELECT pg_advisory_xact_lock($1)", pg_library.WRITE_TURN)
            holding.set()
            await release.wait()

    holding, release = asyncio.Event(), asyncio.Event()
    other = asyncio.create_task(writing_elsewhere(release))
    await holding.wait()
    adding = asyncio.create_task(_paper_with_chunks(alice, "local:frb", [("1 Intro", "Fast radio bursts.")]))
    await asyncio.sleep(0.5)
    assert not adding.done()  # waiting for its turn
    hits = await asyncio.wait_for(bob.rag.search("dark matter halo", 2), 5)  # searches do not wait
    assert hits[0].chunk.paper_id == "local:halo"
    release.set()
    await other
    await asyncio.wait_for(adding, 10)
    assert (await bob.rag.search("fast radio bursts", 1))[0].chunk.paper_id == "local:frb"

    monkeypatch.setattr(pg_library, "WRITE_TURN_WAIT_SECS", 0.5)
    holding, release = asyncio.Event(), asyncio.Event()
    other = asyncio.create_task(writing_elsewhere(release))
    await holding.wait()
    try:
        with caplog.at_level("WARNING", logger="astro_jupyter.store.pg_library"):
            await asyncio.wait_for(_paper_with_chunks(alice, "local:grb", [("1 Intro", "Gamma-ray bursts.")]), 10)
        assert "waited 0.5 s for its turn; writing without it" in caplog.text
        assert await bob.chunks.count("local:grb") == 1
    finally:
        release.set()
        await other
