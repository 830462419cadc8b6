"""SesameClient against the fake Sesame server (real httpx2 client, recorded-shape XML)."""

from __future__ import annotations

import pytest
import pytest_asyncio

from astro_jupyter.config import AstroConfig
from astro_jupyter.errors import NotFoundError, ServiceError, ServiceTimeoutError
from astro_jupyter.services.container import ServiceContainer, Tuning
from astro_jupyter.services.sesame import parse_sesame_xml
from tests.fakes.sesame_server import DATA


@pytest_asyncio.fixture
async def container(tmp_path, sesame_server):
    cfg = AstroConfig(home=str(tmp_path / "home"), service_urls={"sesame": sesame_server.url})
    c = ServiceContainer(cfg, tuning=Tuning(http_timeout_secs=0.5))
    await c.start()
    yield c
    await c.close()


@pytest.mark.asyncio
async def test_resolve_m31(container, sesame_server):
    rec = await container.sesame.resolve("M 31")
    assert rec.main_id == "M 31"
    assert rec.ra_deg == pytest.approx(10.684708, abs=1e-6) and rec.dec_deg == pytest.approx(41.26875, abs=1e-6)
    assert (rec.ra_sexa, rec.dec_sexa) == ("00:42:44.33", "+41:16:07.5")
    assert rec.otype == "AGN" and rec.source_db == "Simbad" and rec.morph_type == "SA(s)b"
    assert "NGC 224" in rec.aliases and "NAME Andromeda" in rec.aliases
    assert rec.extra["radial_velocity_km_s"] == -300
    assert sesame_server.names_asked == ["M 31"]


@pytest.mark.asyncio
async def test_special_characters_are_quoted(container, sesame_server):
    rec = await container.sesame.resolve("Sgr A*")
    assert rec.main_id == "NAME Sgr A*" and rec.dec_deg < 0 and rec.dec_sexa.startswith("-29:00")
    assert sesame_server.names_asked == ["Sgr A*"]


@pytest.mark.asyncio
async def test_unicode_name(container, sesame_server):
    rec = await container.sesame.resolve("α Cen A")
    assert rec.main_id == "* alf Cen A" and rec.otype == "**"
    assert rec.extra["parallax_mas"] == pytest.approx(747.17)
    assert sesame_server.names_asked == ["α Cen A"]


@pytest.mark.asyncio
async def test_unknown_name_is_not_found(container):
    with pytest.raises(NotFoundError, match="no object named 'Xyzzy 12345'"):
        await container.sesame.resolve("Xyzzy 12345")


@pytest.mark.asyncio
async def test_cache_answers_repeat_questions(container, sesame_server):
    first = await container.sesame.resolve("M 87")
    second = await container.sesame.resolve("  m 87 ")
    assert not first.cached and second.cached
    assert second.main_id == first.main_id and second.ra_deg == first.ra_deg
    assert sesame_server.names_asked == ["M 87"]
    await container.sesame.resolve("M 87", use_cache=False)
    assert len(sesame_server.names_asked) == 2


@pytest.mark.asyncio
async def test_not_found_is_not_cached(container, sesame_server):
    for _ in range(2):
        with pytest.raises(NotFoundError):
            await container.sesame.resolve("Nope 1")
    assert len(sesame_server.names_asked) == 2


@pytest.mark.asyncio
async def test_server_error_is_a_service_error(container, sesame_server):
    sesame_server.state["fail_status"] = 503
    with pytest.raises(ServiceError, match="HTTP 503"):
        await container.sesame.resolve("M 31")


@pytest.mark.asyncio
async def test_timeout_is_a_timeout_error(container, sesame_server):
    sesame_server.state["delay"] = 1.5
    with pytest.raises(ServiceTimeoutError, match="did not answer within 0.5 s"):
        await container.sesame.resolve("M 31")


@pytest.mark.asyncio
async def test_unreachable_sesame(tmp_path):
    cfg = AstroConfig(home=str(tmp_path / "h"), service_urls={"sesame": "http://127.0.0.1:9/cgi-bin/nph-sesame"})
    c = ServiceContainer(cfg, tuning=Tuning(http_timeout_secs=0.5))
    await c.start()
    try:
        with pytest.raises(ServiceError, match="Cannot reach Sesame"):
            await c.sesame.resolve("M 31")
    finally:
        await c.close()


def test_parse_all_fixtures_and_garbage():
    assert parse_sesame_xml((DATA / "not_found.xml").read_text(), "x") == []
    assert parse_sesame_xml((DATA / "m87.xml").read_text(), "M 87")[0].otype == "BiC"
    with pytest.raises(ServiceError, match="unreadable"):
        parse_sesame_xml("<html>oops", "M 31")


@pytest.mark.asyncio
async def test_read_only_cache_does_not_stop_a_lookup(container):
    await container.db.execute("PRAGMA query_only = ON")
    try:
        rec = await container.sesame.resolve("M 31")
        assert rec.main_id == "M 31" and not rec.cached
    finally:
        await container.db.execute("PRAGMA query_only = OFF")


@pytest.mark.asyncio
async def test_aliases_merged_from_every_database(container, sesame_server):
    rec = await container.sesame.resolve("M 31")
    assert sesame_server.options_asked == ["~SNV"]
    # Simbad answered first: its position, type and main identifier are kept, not NED's or VizieR's
    assert rec.main_id == "M 31" and rec.source_db == "Simbad" and rec.otype == "AGN"
    assert (rec.ra_deg, rec.dec_deg) == (pytest.approx(10.684708, abs=1e-6), pytest.approx(41.26875, abs=1e-6))
    assert (rec.ra_sexa, rec.dec_sexa) == ("00:42:44.33", "+41:16:07.5")
    assert rec.databases == ["Simbad", "NED", "VizieR"]
    # NED's own name and aliases appear after Simbad's, each once
    for ned_only in ("MESSIER 031", "NGC 0224", "UGC 00454", "Andromeda Galaxy", "IRAS 00400+4059"):
        assert ned_only in rec.aliases
    assert rec.aliases.index("2C 56") < rec.aliases.index("MESSIER 031") < rec.aliases.index("[RC3] NGC 224")
    keys = [a.lower() for a in rec.aliases]
    assert len(keys) == len(set(keys))
    assert rec.aliases.count("2MASX J00424433+4116074") == 1  # in both Simbad's and NED's lists
    assert "LEDA  2557" not in rec.aliases and rec.aliases.count("LEDA 2557") == 1  # whitespace variant
    assert "NGC 224" in rec.aliases and "M 31" not in rec.aliases  # VizieR's name duplicates Simbad's alias


@pytest.mark.asyncio
async def test_first_database_only_form(container, sesame_server):
    rec = await container.sesame.resolve("M 31", databases="SNV")
    assert sesame_server.options_asked == ["SNV"]
    assert rec.databases == ["Simbad"] and "MESSIER 031" not in rec.aliases
    # the cache key names the query form: the merged question is asked again, not answered from SNV's row
    merged = await container.sesame.resolve("M 31")
    assert not merged.cached and "MESSIER 031" in merged.aliases
    assert sesame_server.options_asked == ["SNV", "~SNV"]
    again = await container.sesame.resolve("m 31", databases="SNV")
    assert again.cached and "MESSIER 031" not in again.aliases
    assert container.sesame.cache_key("M 31") != container.sesame.cache_key("M 31", "SNV")


@pytest.mark.asyncio
async def test_unknown_name_is_not_found_in_both_forms(container, sesame_server):
    for form in ("~SNV", "SNV"):
        with pytest.raises(NotFoundError, match="no object named 'Xyzzy 12345'"):
            await container.sesame.resolve("Xyzzy 12345", databases=form)
    assert sesame_server.options_asked == ["~SNV", "SNV"]


@pytest.mark.asyncio
async def test_merged_record_survives_the_cache(container, sesame_server):
    first = await container.sesame.resolve("Andromeda")
    second = await container.sesame.resolve("andromeda")
    assert second.cached and second.aliases == first.aliases and second.databases == first.databases


@pytest.mark.asyncio
async def test_prime_cache_answers_like_a_fetch(container, sesame_server):
    primed = await container.sesame.prime_cache("M 31", (DATA / "m31.xml").read_text())
    rec = await container.sesame.resolve("M 31")
    assert rec.cached and sesame_server.names_asked == []
    assert rec.aliases == primed.aliases and "MESSIER 031" in rec.aliases and rec.source_db == "Simbad"


def test_fake_first_database_form_drops_later_blocks():
    from tests.fakes.sesame_server import select_resolvers

    text = (DATA / "m31.xml").read_text()
    assert [r.source_db for r in parse_sesame_xml(select_resolvers(text, "SNV", every=False), "M 31")] == ["Simbad"]
    assert [r.source_db for r in parse_sesame_xml(select_resolvers(text, "SNV", every=True), "M 31")] == ["Simbad", "NED", "VizieR"]
    assert [r.source_db for r in parse_sesame_xml(select_resolvers(text, "NV", every=False), "M 31")] == ["NED"]


@pytest.mark.asyncio
async def test_offline_cache_answers_other_spellings_and_aliases(tmp_path):
    """The demo's cache, Sesame unreachable: M31, Messier 31, NGC 224 and the alias Andromeda all answer."""
    from astro_jupyter.demo import sample_sesame_files

    cfg = AstroConfig(home=str(tmp_path / "home"), service_urls={"sesame": "http://127.0.0.1:9"})
    c = await ServiceContainer(cfg, tuning=Tuning(http_timeout_secs=0.5)).start()
    try:
        for name, xml_text in sample_sesame_files():
            await c.sesame.prime_cache(name, xml_text)
        for asked in ("M 31", "M31", "m31", "  M   31 ", "Messier 31", "MESSIER 031", "NGC 224", "NGC 0224",
                      "Andromeda", "andromeda galaxy", "NAME Andromeda", "LEDA 2557"):
            rec = await c.sesame.resolve(asked)
            assert rec.main_id == "M 31" and rec.cached and rec.name == " ".join(asked.split())
        assert (await c.sesame.resolve("M87")).main_id == "M 87"
        assert (await c.sesame.resolve("sgr a*")).main_id == "NAME Sgr A*"
        assert (await c.sesame.resolve("alf Cen A")).main_id == "* alf Cen A"
        with pytest.raises(ServiceError, match="Cannot reach Sesame"):
            await c.sesame.resolve("M 33")  # not cached: a real lookup, which fails offline
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_an_alias_never_replaces_an_asked_name(container, sesame_server):
    """Aliases fill free keys only: another object listing 'NGC 224' does not take over M 31's entry."""
    from astro_jupyter.demo import sample_sesame_files

    m31 = await container.sesame.resolve("NGC 224")
    assert m31.main_id == "M 31"
    m87_xml = dict(sample_sesame_files())["M 87"].replace("<alias>", "<alias>NGC 224</alias><alias>", 1)
    await container.sesame.prime_cache("M 87", m87_xml)
    assert (await container.sesame.resolve("NGC 224")).main_id == "M 31"
    assert (await container.sesame.resolve("M87")).main_id == "M 87"


@pytest.mark.asyncio
async def test_cache_rows_written_before_normalisation_are_still_read(container, sesame_server):
    await container.sesame.resolve("M 31")
    await container.db.execute("UPDATE sesame_cache SET query = '~SNV:m 31' WHERE query = '~SNV:m31'")
    await container.db.execute("DELETE FROM sesame_cache WHERE query != '~SNV:m 31'")
    assert (await container.sesame.resolve("M 31")).cached
    assert sesame_server.names_asked == ["M 31"]  # the first lookup only
