"""The shared library's word → chunk postings (store/pg_library.py, store/pg_sql/0002_chunk_terms.sql) on a
real PostgreSQL: BM25 from them scores exactly as SQLite's FTS5 does on the same chunks, and a library
written before they existed (or by an older version) is indexed in the background while searches go on; and
no user embeds the chunks of a paper another user is parsing."""

from __future__ import annotations

import asyncio

import pytest

from astro_jupyter.services.parse.chunking import Chunk
from astro_jupyter.services.rag import fts_query
from astro_jupyter.store.papers import PaperRecord
from astro_jupyter.store.pg import PgDatabase, load_pg_migrations
from tests.waiting import until

# PostgreSQL's parser and FTS5's split these differently: "1.5" (one token there), "H-alpha" (three
# there), "Ångström" (accents kept there); "galaxies"/"galaxy" share a stem (FTS5 counts both phrases)
TEXTS = [
    ("1 Introduction", "H-alpha emission of 1.5 per cent in nearby galaxies, measured in Ångström units."),
    ("2 Data", "The galaxy sample: spectra from the survey, each galaxy observed twice at 1.5 arcsec."),
    ("3 Results", "Star formation rates from H-alpha agree with the ultraviolet rates for most galaxies."),
    ("4 Discussion", "Dust attenuation explains the remaining offset between the two tracers of star formation."),
    ("References", "Kennicutt R. C. 1998, ARA&A 36 189; galaxies and H-alpha star formation."),
]
QUESTIONS = ["H-alpha galaxies galaxy", "1.5 angstrom", "star formation dust", "ultraviolet survey spectra"]


def _chunks() -> list[Chunk]:
    return [Chunk(n, section, "references" if section == "References" else "body", n + 1, n + 1, text)
            for n, (section, text) in enumerate(TEXTS)]


async def _ranked(chunks, question: str) -> list[tuple[int, float]]:
    """(seq, BM25) best first, by chunk position so the two stores' ids need not agree."""
    hits = await chunks.fts(fts_query(question), 10)
    rows = await chunks.get_many([i for i, _ in hits])
    return [(rows[i].seq, round(score, 9)) for i, score in hits]


@pytest.mark.asyncio
async def test_bm25_from_the_postings_scores_as_fts5(make_database, make_container) -> None:
    sqlite = await make_container("")
    shared = await make_container(make_database("postgres"))
    for c in (sqlite, shared):
        for paper in ("local:a", "local:b"):
            await c.library.papers.insert(PaperRecord(id=paper, title=paper, state="parsed"))
            await c.chunks.replace(paper, _chunks()[: 5 if paper == "local:a" else 3])
    for question in QUESTIONS:
        expected = await _ranked(sqlite.chunks, question)
        assert expected, question
        assert await _ranked(shared.chunks, question) == expected, question
    # a paper's own chunks only, references never
    only_b = await shared.chunks.fts(fts_query("galaxies"), 10, paper_ids=["local:b"])
    rows = await shared.chunks.get_many([i for i, _ in only_b])
    assert only_b and {r.paper_id for r in rows.values()} == {"local:b"}
    assert all(r.part != "references" for r in rows.values())


@pytest.mark.asyncio
async def test_chunks_written_without_postings_are_indexed_in_the_background(make_database, make_container) -> None:
    url = make_database("postgres")
    old = PgDatabase(url, migrations=load_pg_migrations()[:1])  # the schema before the postings
    await old.pool()
    await old.execute("INSERT INTO papers (id, title, state) VALUES ('local:old', 'old', 'parsed')")
    for chunk in _chunks():
        await old.execute("INSERT INTO paper_chunks (paper_id, seq, section, part, text) VALUES ($1, $2, $3, $4, $5)",
                          "local:old", chunk.seq, chunk.section, chunk.part, chunk.text)
    await old.close()

    sqlite = await make_container("")
    await sqlite.library.papers.insert(PaperRecord(id="local:old", title="old", state="parsed"))
    await sqlite.chunks.replace("local:old", _chunks())
    shared = await make_container(url)  # migrates to the postings schema on first use
    repo = shared.chunks
    first = await repo.fts(fts_query("star formation dust"), 10)  # answered while the chunks wait for postings
    assert {(await repo.get_many([first[0][0]]))[first[0][0]].seq} == {3}
    await until(lambda: repo._indexing is not None and repo._indexing.done(), what="background indexing")
    assert await shared.shared_library.fetchval("SELECT count(*) FROM paper_chunks WHERE fts_length IS NULL") == 0
    for question in QUESTIONS:
        assert await _ranked(repo, question) == await _ranked(sqlite.chunks, question), question

    # a chunk an older version writes later (no fts_length) is picked up after that write
    await shared.shared_library.execute("SELECT nextval('library_changes')")
    await shared.shared_library.execute(
        "INSERT INTO paper_chunks (paper_id, seq, section, part, text) VALUES ('local:old', 9, '5 Late', 'body',"
        " 'Magnetars power fast radio bursts.')")
    await sqlite.chunks.replace("local:old", [*_chunks(), Chunk(9, "5 Late", "body", None, None,
                                                                "Magnetars power fast radio bursts.")])
    assert [s for s, _ in await _ranked(repo, "magnetars")] == [9]
    await until(lambda: repo._indexing.done(), what="background indexing")
    for question in [*QUESTIONS, "magnetars radio"]:
        assert await _ranked(repo, question) == await _ranked(sqlite.chunks, question), question


@pytest.mark.asyncio
async def test_chunks_of_a_paper_being_parsed_are_left_to_that_parse(make_database, make_container) -> None:
    """Every search after another user's write looks for chunks without a vector (rag.sync); the chunks
    of a paper someone is parsing get theirs from that parse, so no other user embeds them meanwhile."""
    url = make_database("postgres")
    alice, bob = await make_container(url, user="alice"), await make_container(url, user="bob")
    await alice.library.papers.insert(PaperRecord(id="local:p", title="p", state="downloaded"))
    space = await bob.chunks.ensure_space("lexical-v2", 384)
    async with alice.library.papers.parse_claim("local:p"):
        ids = await alice.chunks.replace("local:p", _chunks())
        assert await bob.chunks.missing_vectors(space) == []
    missing = await bob.chunks.missing_vectors(space)  # the parse ended without vectors (say, the endpoint failed)
    assert [c.id for c in missing] == ids[:4]  # the searchable ones: references never get a vector


@pytest.mark.asyncio
async def test_searches_look_for_other_users_chunks_without_vectors_only_now_and_then(make_database,
                                                                                      make_container) -> None:
    """On a shared library every other user's write changes the data version; a search does not scan every
    chunk for missing vectors after each of them, only every ``missing_check_secs`` (or after a failure)."""
    url = make_database("postgres")
    alice, bob = await make_container(url, user="alice"), await make_container(url, user="bob")
    await bob.rag.sync()  # the first look
    await alice.library.papers.insert(PaperRecord(id="local:p", title="p", state="parsed"))
    await alice.chunks.replace("local:p", _chunks())  # stored without vectors (say, alice's endpoint failed)
    assert await bob.rag.sync() == 0  # not looked for again so soon
    bob.chunks.missing_check_secs = 0.0  # the interval is over
    assert await bob.rag.sync() == 4  # the searchable chunks, embedded by bob's search
    assert await bob.chunks.missing_vectors(await bob.rag.space()) == []


@pytest.mark.asyncio
async def test_a_search_does_not_wait_for_the_periodic_look_for_chunks_without_vectors(make_database,
                                                                                       make_container) -> None:
    """The periodic look (an anti-join over every chunk of the shared library) runs beside a search, not before
    its answer: the chunks it will find are found by full text meanwhile, and get their vectors when it ends."""
    url = make_database("postgres")
    alice, bob = await make_container(url, user="alice"), await make_container(url, user="bob")
    await bob.rag.search("anything", 3)  # the first look of bob's server (answered after it)
    await alice.library.papers.insert(PaperRecord(id="local:p", title="p", state="parsed"))
    await alice.chunks.replace("local:p", _chunks())  # stored without vectors (say, alice's endpoint failed)
    bob.chunks.missing_check_secs = 0.0  # the interval is over
    scan = bob.chunks.missing_vectors
    looking, finish = asyncio.Event(), asyncio.Event()

    async def slow_scan(space, **kwargs):  # the scan of a large library, still going while bob's search answers
        looking.set()
        await finish.wait()
        return await scan(space, **kwargs)

    bob.chunks.missing_vectors = slow_scan
    hits = await asyncio.wait_for(bob.rag.search("star formation dust", 3), 20)
    assert [h.chunk.seq for h in hits][:1] == [3] and hits[0].similarity is None  # by full text alone
    await until(looking.is_set, what="the look for chunks without a vector started")
    finish.set()
    space = await bob.rag.space()
    missing: list = [None]

    async def none_missing() -> bool:
        missing[:] = await scan(space)
        return not missing

    deadline = asyncio.get_running_loop().time() + 20
    while not await none_missing():
        assert asyncio.get_running_loop().time() < deadline, f"{len(missing)} chunks still without a vector"
        await asyncio.sleep(0.02)
    hits = await bob.rag.search("star formation dust", 3)
    assert hits[0].chunk.seq == 3 and hits[0].similarity is not None  # and now by its vector too


@pytest.mark.asyncio
async def test_a_common_word_costs_its_postings_not_a_page_per_chunk_holding_it(make_database, make_container,
                                                                                monkeypatch) -> None:
    """With ten users searching at once on a busy hub, BM25's cost decides how long each waits: a question word
    held by 1,500 chunks is read as that word's postings (a few pages), not as every one of those chunks' rows
    (0002's jsonb counts: a heap page per handful of chunks, 26k of them for a common word in 100k chunks)."""
    import json

    import numpy as np

    rng = np.random.default_rng(7)
    words = [f"w{n}" for n in range(3000)]
    shared = await make_container(make_database("postgres"))
    sqlite = await make_container("")
    chunks = [Chunk(n, "1 Timing", "body", 1, 1,
                    "pulsar " + " ".join(rng.choice(words, 40)) + (" glitch" if n % 97 == 0 else "")) for n in range(1500)]
    for c in (shared, sqlite):
        await c.library.papers.insert(PaperRecord(id="local:big", title="big", state="parsed"))
        await c.chunks.replace("local:big", chunks)
    sent: list[tuple[str, tuple]] = []
    fetch = shared.shared_library.fetch

    async def spy(sql: str, *args: object) -> list:
        sent.append((sql, args))
        return await fetch(sql, *args)

    monkeypatch.setattr(shared.shared_library, "fetch", spy)
    assert await _ranked(shared.chunks, "pulsar glitch") == await _ranked(sqlite.chunks, "pulsar glitch")
    sql, args = next((q, a) for q, a in reversed(sent) if q.startswith("WITH"))  # the BM25 statement
    explained = await fetch("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, *args)
    plan = json.loads(explained[0][0])[0]["Plan"]
    pages = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    assert pages < 40, f"the BM25 query read {pages} pages for a word in 1,500 chunks"


@pytest.mark.asyncio
async def test_postings_columns_go_as_array_literals_the_server_reads_back_exactly(make_database) -> None:
    """A paper's postings are sent as one array literal per column (asyncpg's per-element encoding of ~6,000
    postings took the event loop's time at the searches' priority): whatever a term holds comes back as it was."""
    from astro_jupyter.store.pg_library import _int_array, _text_array

    db = PgDatabase(make_database("postgres"))
    try:
        terms = ['a"b', "c\\d", "{x,y}", "NULL", " sp ", "", "ångström", "x'y"]
        assert await db.fetchval("SELECT $1::text::text[]", _text_array(terms)) == terms
        assert await db.fetchval("SELECT $1::text::bigint[]", _int_array([1, 2**40, 0])) == [1, 2**40, 0]
    finally:
        await db.close()
