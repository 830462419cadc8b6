"""HistorySearch: FTS5 over session titles/summaries and message content, with highlighted snippets."""

from __future__ import annotations

import pytest

from astro_jupyter.store.history import HistorySearch, fts_query, snippet_to_html


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
