"""HistorySearch: FTS5 over session titles/summaries and message content, with highlighted snippets."""

from __future__ import annotations

import pytest

from astro_jupyter.store.history import HistorySearch, InvalidCursor, fts_query, snippet_to_html


def test_fts_query_quotes_words_and_keeps_prefix() -> None:
    assert fts_query('M31 - halo "NEAR" AND') == '"M31" "halo" "NEAR"'
    assert fts_query("galax*") == '"galax"*'
    assert fts_query("  ---  ") == ""


def test_snippet_to_html_escapes_then_marks() -> None:
    assert snippet_to_html("a <b> «halo» c") == "a &lt;b&gt; <mark>halo</mark> c"


@pytest.mark.asyncio
async def test_search_finds_messages_and_titles_with_highlights(services) -> None:
    s1 = await services.sessions.create(title="Andromeda halo mass")
    s2 = await services.sessions.create(title="Quasar luminosity")
    await services.messages.append(s1.id, {"role": "user", "content": "What is the dark matter halo mass of M31?"})
    m2 = await services.messages.append(s2.id, {"role": "assistant", "content": "The halo of this quasar host is massive."})
    await services.messages.append(s2.id, {"role": "user", "content": "unrelated text about spectra"})

    hits = await HistorySearch(services.db).search("halo")
    kinds = {(h["session_id"], h["role"]) for h in hits}
    assert (s1.id, "user") in kinds and (s2.id, "assistant") in kinds and (s1.id, "session") in kinds
    assert all("«halo»" in h["snippet"].lower() or "«halo»" in h["snippet"] for h in hits)
    assert [h["rank"] for h in hits] == sorted(h["rank"] for h in hits)
    by_msg = {h["message_id"]: h for h in hits if h["message_id"]}
    assert by_msg[m2]["session_title"] == "Quasar luminosity"

    await services.messages.append(s2.id, {"role": "user", "content": "halo again"}, run_id="run_x")
    assert not any(h["run_id"] == "run_x" for h in await HistorySearch(services.db).search("halo", exclude_run_id="run_x"))
    assert any(h["run_id"] == "run_x" for h in await HistorySearch(services.db).search("halo"))
    only_s2 = await HistorySearch(services.db).search("halo", session_id=s2.id, exclude_run_id="run_x")
    assert {h["session_id"] for h in only_s2} == {s2.id}
    assert [h["message_id"] for h in only_s2] == [m2]


@pytest.mark.asyncio
async def test_search_is_safe_with_fts_syntax_and_empty_queries(services) -> None:
    s = await services.sessions.create(title="t")
    await services.messages.append(s.id, {"role": "user", "content": 'NGC 1275 "perseus" cluster'})
    search = HistorySearch(services.db)
    assert await search.search("") == []
    assert await search.search('"') == []
    hits = await search.search('perseus" OR (')
    assert len(hits) == 1 and "«perseus»" in hits[0]["snippet"]
    assert await search.search("nothing-matches-this") == []


@pytest.mark.asyncio
async def test_search_sees_updated_summaries_and_limit(services) -> None:
    s = await services.sessions.create(title="plain")
    await services.sessions.update(s.id, summary="found redshift of the lens")
    for i in range(5):
        await services.messages.append(s.id, {"role": "user", "content": f"redshift note {i}"})
    search = HistorySearch(services.db)
    assert len(await search.search("redshift", limit=3)) == 3
    titles = [h for h in await search.search("lens") if h["role"] == "session"]
    assert titles and "«lens»" in titles[0]["snippet"]


# -- at scale: BM25 within a recency window, "more results" through a cursor --------------------------
async def _texts(services, session_id: str, texts: list[str], run_id: str = "") -> list[int]:
    return [await services.messages.append(session_id, {"role": "user", "content": t}, run_id=run_id) for t in texts]


async def _all_pages(search: HistorySearch, query: str, limit: int, **kwargs) -> list[list[dict]]:
    pages, cursor = [], None
    for _ in range(100):
        page = await search.search_page(query, limit=limit, cursor=cursor, **kwargs)
        pages.append(page.hits)
        cursor = page.next_cursor
        if cursor is None:
            return pages
    raise AssertionError("paging never ended")


@pytest.mark.asyncio
async def test_a_window_holding_every_match_ranks_exactly_like_fts5_bm25(services) -> None:
    """With all matches in one window the order and scores are FTS5's bm25() over the whole table:
    term counts (stemmed forms too), document length and each word's IDF all count."""
    s = await services.sessions.create(title="notes")
    await _texts(services, s.id, [
        "the halo mass of the galaxy from rotation curves",
        "halo halo halos and the galaxy mass profile of satellites in the outer halo",
        "galaxy galaxy galaxy galaxy mass",
        "a galaxy with a massive halo; mass estimates from lensing and from dynamics disagree",
        "mass to light ratio of the galaxy disc and its halo, mass models compared across a long list of papers",
        "masses of galaxy halos",
        "the galaxy",  # no halo: not a match
        "dark matter halo mass function and the galaxy stellar mass function in the same volume",
    ] + [f"galaxy survey field {i} photometry" for i in range(12)])  # "galaxy" is common, so its IDF is low
    search = HistorySearch(services.db, window=50)
    page = await search.search_page("halo mass", limit=20)
    mine = [(h["message_id"], h["rank"]) for h in page.hits if h["message_id"]]
    exact = await services.db.fetchall(
        "SELECT rowid, bm25(agent_messages_fts) AS r FROM agent_messages_fts WHERE agent_messages_fts MATCH ?"
        " ORDER BY r, rowid DESC", (fts_query("halo mass"),)
    )
    assert [m for m, _ in mine] == [r["rowid"] for r in exact]
    assert [r for _, r in mine] == pytest.approx([r["r"] for r in exact], rel=1e-9)
    assert page.next_cursor is None

    # the rare word weighs more than the common one: two "halo" beat four "galaxy"
    both = await search.search("galaxy halo", limit=20)
    assert "halo halo halos" in both[0]["snippet"].replace("«", "").replace("»", "")


@pytest.mark.asyncio
async def test_newest_matches_are_ranked_first_and_more_results_reach_the_older_ones(services) -> None:
    s = await services.sessions.create(title="work log")
    best_old = (await _texts(services, s.id, ["quasar quasar quasar quasar"]))[0]
    older = await _texts(services, s.id, [f"a long note {i} that mentions one quasar among many other words here" for i in range(2)])
    newer = await _texts(services, s.id, [
        "quasar quasar note",
        "one quasar in a long note with very many other words in it as well",
        "a quasar in a note of middling length here",
    ])
    search = HistorySearch(services.db, window=3)

    first = await search.search_page("quasar", limit=3)
    ids = [h["message_id"] for h in first.hits]
    assert ids == [newer[0], newer[2], newer[1]]  # the newest three, best (BM25) first
    assert best_old not in ids and first.next_cursor

    late = (await _texts(services, s.id, ["quasar written after the first page"]))[0]
    second = await search.search_page("quasar", limit=3, cursor=first.next_cursor)
    assert second.hits[0]["message_id"] == best_old  # the next window, ranked: the best old match leads it
    pages = [first.hits, second.hits]
    cursor = second.next_cursor
    while cursor:
        page = await search.search_page("quasar", limit=3, cursor=cursor)
        pages.append(page.hits)
        cursor = page.next_cursor
    seen = [h["message_id"] for p in pages for h in p]
    assert sorted(seen) == sorted([best_old, *older, *newer])  # each match once; the later message waits for a new search
    assert late not in seen
    assert (await search.search_page("quasar", limit=1)).hits[0]["message_id"] == late


@pytest.mark.asyncio
async def test_paging_merges_title_hits_and_messages_without_repeats(services) -> None:
    for i in range(4):
        s = await services.sessions.create(title=f"Pulsar timing {i}")
        await _texts(services, s.id, [f"pulsar glitch {i}", f"pulsar spin {i}", "unrelated"])
    search = HistorySearch(services.db, window=2)
    pages = await _all_pages(search, "pulsar", limit=3)
    hits = [h for p in pages for h in p]
    assert all(len(p) == 3 for p in pages[:-1]) and len(hits) == 12
    keys = [(h["session_id"], h["message_id"]) for h in hits]
    assert len(set(keys)) == 12 and sum(h["role"] == "session" for h in hits) == 4
    assert all("«" in h["snippet"] for h in hits)


@pytest.mark.asyncio
async def test_owner_filter_pages_past_other_peoples_matches(services) -> None:
    bob = await services.sessions.create(title="bob's", owner="bob")
    bob_msgs = await _texts(services, bob.id, ["my blazar flare", "blazar spectrum"])
    shared = await services.sessions.create(title="shared")  # unowned: everyone sees it
    shared_msg = (await _texts(services, shared.id, ["blazar jet"]))[0]
    alice = await services.sessions.create(title="Blazar survey", owner="alice")
    await _texts(services, alice.id, [f"blazar {i}" for i in range(30)])  # newer than bob's
    search = HistorySearch(services.db, window=2, scan_limit=4)
    pages = await _all_pages(search, "blazar", limit=5, owner="bob")
    hits = [h for p in pages for h in p]
    assert {h["message_id"] for h in hits} == {*bob_msgs, shared_msg}
    assert alice.id not in {h["session_id"] for h in hits}
    assert len(pages) > 1  # the scan limit cut the first request short; the cursor carried on
    assert {h["session_id"] for h in await search.search("blazar", owner="alice", limit=50)} >= {alice.id}


@pytest.mark.asyncio
async def test_a_cursor_is_checked(services) -> None:
    s = await services.sessions.create(title="t")
    await _texts(services, s.id, [f"nova {i}" for i in range(5)])
    search = HistorySearch(services.db, window=2)
    cursor = (await search.search_page("nova", limit=2)).next_cursor
    assert cursor
    with pytest.raises(InvalidCursor, match="not a history-search cursor"):
        await search.search_page("nova", cursor="'; DROP TABLE agent_messages; --")
    with pytest.raises(InvalidCursor, match="different search"):
        await search.search_page("supernova", cursor=cursor)
    with pytest.raises(InvalidCursor, match="different search"):
        await search.search_page("nova", session_id=s.id, cursor=cursor)
    assert len((await search.search_page("nova", limit=2, cursor=cursor)).hits) == 2


@pytest.mark.asyncio
async def test_paging_returns_every_match_exactly_once_for_any_window_limit_and_filter(services) -> None:
    """Against plain SQL: whatever the window, page size, scan limit and filters, the pages hold each match once."""
    import random

    rng = random.Random(5)
    owners = ["", "ann", "ben"]
    sessions = []
    for i in range(6):
        s = await services.sessions.create(title=rng.choice(["comet tail", "asteroid belt", "comet coma"]), owner=owners[i % 3])
        sessions.append(s)
    for _ in range(40):
        s = rng.choice(sessions)
        words = rng.choices(["comet", "comets", "dust", "ion", "tail", "nucleus"], k=rng.randint(1, 6))
        await services.messages.append(s.id, {"role": "user", "content": " ".join(words)}, run_id=rng.choice(["r1", "r2"]))
    for query in ("comet", "comet tail", "dust ion"):
        for window, limit, scan in ((1, 1, 1), (2, 3, 3), (3, 2, 50), (5, 7, 6), (50, 4, 50)):
            for owner, session, exclude in ((None, None, ""), ("ann", None, "r1"), (None, sessions[1].id, ""), ("ben", sessions[2].id, "r2")):
                search = HistorySearch(services.db, window=window, scan_limit=scan)
                pages = await _all_pages(search, query, limit, owner=owner, session_id=session, exclude_run_id=exclude)
                got = [h["message_id"] for p in pages for h in p if h["message_id"]]
                got_sessions = [h["session_id"] for p in pages for h in p if not h["message_id"]]
                want = await services.db.fetchall(
                    "SELECT m.id, s.owner, m.session_id, m.run_id FROM agent_messages_fts f JOIN agent_messages m ON m.id = f.rowid"
                    " JOIN agent_sessions s ON s.id = m.session_id WHERE agent_messages_fts MATCH ?", (fts_query(query),)
                )
                expected = [r["id"] for r in want if (owner is None or r["owner"] in ("", owner))
                            and (session is None or r["session_id"] == session) and r["run_id"] != exclude]
                assert sorted(got) == sorted(expected), (query, window, limit, scan, owner, session)
                titles = await services.db.fetchall(
                    "SELECT s.id, s.owner FROM agent_sessions_fts f JOIN agent_sessions s ON s.rowid = f.rowid"
                    " WHERE agent_sessions_fts MATCH ?", (fts_query(query),)
                )
                expected_s = [r["id"] for r in titles if (owner is None or r["owner"] in ("", owner)) and session in (None, r["id"])]
                assert sorted(got_sessions) == sorted(expected_s), (query, window, limit, scan, owner, session)
                assert all(len(p) == limit for p in pages[:-1] if scan >= 50 or owner is None and session is None and not exclude)
