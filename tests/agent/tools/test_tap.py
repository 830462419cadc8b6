"""query_catalog / describe_catalog / cone_search against a real GAVO DaCHS on loopback.

The tools run through ``AstroApp.run_tool`` (validation → permission pipeline → executor), and
pyvo talks TAP to DaCHS exactly as it would to an archive. Skips only when DaCHS is not
installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import asyncio
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from astro_jupyter.app import AstroApp
from astro_jupyter.app.follow import Question
from astro_jupyter.config import AstroConfig
from tests.fakes import dachs
from tests.fakes.base import FakeHandler, FakeServer

pytestmark = pytest.mark.skipif(not dachs.installed(), reason="GAVO DaCHS is not installed (.ci/run installs gavodachs2-server)")

STARS = "astrojup.stars"


class Scripted:
    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.asked: list[Question] = []

    async def answer(self, question: Question) -> str:
        self.asked.append(question)
        return self.replies.pop(0)


def tap_config(tmp_path: Path, tap_url: str, **extra: Any) -> AstroConfig:
    return AstroConfig(home=str(tmp_path / "home"), project_root=str(tmp_path), tap_services={"local": tap_url},
                       openai_base_url="http://127.0.0.1:9/v1", **extra)


@pytest_asyncio.fixture
async def app(tmp_path: Path, dachs_server: dachs.DachsServer) -> AsyncIterator[AstroApp]:
    astro = AstroApp(tap_config(tmp_path, dachs_server.tap_url), source="cli")
    await astro.start()
    try:
        yield astro
    finally:
        await astro.close()


def _job_gone(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=5)
    except urllib.error.HTTPError as exc:
        return exc.code == 404
    return False


@pytest.mark.asyncio
async def test_sync_query_stores_a_votable_with_provenance_and_previews(app: AstroApp) -> None:
    from astropy.table import Table

    adql = f"SELECT TOP 120 source_id, ra, dec, vmag FROM {STARS} ORDER BY source_id"
    run = await app.run_tool("query_catalog", {"service": "local", "adql": adql})
    assert not run.is_error, run.content
    cat = run.metadata["catalog"]
    assert cat["row_count"] == 120 and cat["truncated"] is False and cat["mode"] == "sync"
    assert cat["position"] == {"ra": "ra", "dec": "dec"}
    assert {"name": "ra", "unit": "deg", "ucd": "pos.eq.ra;meta.main", "datatype": "float64"} in cat["columns"]
    assert len(cat["preview"]) == 50 and cat["preview"][0]["source_id"] == 0
    assert "120 rows from local" in run.content and "ra [deg] (pos.eq.ra;meta.main)" in run.content
    assert len(run.content) < 7000  # a bounded preview, not 120 rows
    table = Table.read(run.metadata["path"], format="votable")
    assert len(table) == 120 and str(table["vmag"].unit) == "mag"
    record = await app.services.tap.get(cat["result_id"])
    assert (record.status, record.service, record.adql, record.row_count) == ("ok", "local", adql, 120)
    assert record.created_at and record.path == run.metadata["path"]


@pytest.mark.asyncio
async def test_a_query_over_maxrec_is_marked_truncated(app: AstroApp) -> None:
    run = await app.run_tool("query_catalog", {"service": "local", "adql": f"SELECT source_id FROM {STARS}", "maxrec": 25})
    assert not run.is_error, run.content
    assert run.metadata["catalog"]["row_count"] == 25 and run.metadata["catalog"]["truncated"] is True
    assert "TRUNCATED at maxrec=25" in run.content


@pytest.mark.asyncio
async def test_malformed_adql_returns_the_services_message_with_a_hint_and_stores_no_file(app: AstroApp) -> None:
    run = await app.run_tool("query_catalog", {"service": "local", "adql": f"SELECT TOP 3 no_such_col FROM {STARS}"})
    assert run.is_error and "no_such_col" in run.content and "describe_catalog" in run.content
    assert "Traceback" not in run.content
    [record] = await app.services.tap.repo.list()
    assert record.status == "error" and "no_such_col" in record.error and record.path is None
    folder = Path(app.config.tool_results_dir) / "catalogs"
    assert not any(folder.iterdir())  # nothing half-stored


@pytest.mark.asyncio
async def test_unknown_service_lists_the_known_ones(app: AstroApp) -> None:
    run = await app.run_tool("query_catalog", {"service": "nosuch", "adql": "SELECT 1"})
    assert run.is_error and "unknown TAP service 'nosuch'" in run.content and "simbad" in run.content


@pytest.mark.asyncio
async def test_an_unconfigured_url_asks_first_and_is_denied_without_an_answerer(app: AstroApp, dachs_server) -> None:
    url = dachs_server.tap_url.replace("127.0.0.1", "localhost")  # the same server, not under a configured name
    denied = await app.run_tool("query_catalog", {"service": url, "adql": f"SELECT TOP 1 * FROM {STARS}"})
    assert denied.is_error and "denied" in denied.content.lower()
    assert await app.services.tap.repo.list() == []
    answerer = Scripted("allow")
    allowed = await app.run_tool("query_catalog", {"service": url, "adql": f"SELECT TOP 1 * FROM {STARS}"},
                                 answerer=answerer)
    [question] = answerer.asked
    assert question.type == "permission_request" and url in question.message
    # allowed by the user, but the private-address guard still refuses loopback for an unknown service
    assert allowed.is_error and "loopback/private" in allowed.content


@pytest.mark.asyncio
async def test_maxrec_above_the_cap_asks(app: AstroApp) -> None:
    answerer = Scripted("deny")
    run = await app.run_tool("query_catalog", {"service": "local", "adql": f"SELECT TOP 1 * FROM {STARS}",
                                               "maxrec": 5_000_000}, answerer=answerer)
    assert run.is_error and "denied" in run.content.lower()
    assert "5,000,000" in answerer.asked[0].message
    too_many = await app.run_tool("query_catalog", {"service": "local", "adql": "SELECT 1", "maxrec": 10**9})
    assert too_many.is_error  # beyond the hard limit: refused by the schema, never asked


@pytest.mark.asyncio
async def test_unreachable_service_is_a_clear_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    astro = AstroApp(tap_config(tmp_path, f"http://127.0.0.1:{port}/tap"), source="cli")
    await astro.start()
    try:
        run = await astro.run_tool("query_catalog", {"service": "local", "adql": "SELECT 1 AS one"})
    finally:
        await astro.close()
    assert run.is_error and "unreachable" in run.content


class _Broken(FakeHandler):
    """A TAP endpoint that answers 500 with text, or redirects to a private address."""

    def do_POST(self) -> None:  # noqa: N802
        self.record()
        if self.fake.state.get("redirect"):
            self.send_response(302)
            self.send_header("Location", self.fake.state["redirect"])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_body(500, b"Internal error: the database is on fire", "text/plain")


@pytest.mark.asyncio
async def test_a_500_from_the_service_is_reported_with_its_text(tmp_path: Path) -> None:
    with FakeServer(_Broken) as fake:
        astro = AstroApp(tap_config(tmp_path, f"{fake.url}/tap"), source="cli")
        await astro.start()
        try:
            run = await astro.run_tool("query_catalog", {"service": "local", "adql": "SELECT 1 AS one"})
            [record] = await astro.services.tap.repo.list()
        finally:
            await astro.close()
    assert run.is_error and "HTTP 500" in run.content
    assert record.status == "error" and "HTTP 500" in record.error and record.path is None


SERVICE_MESSAGE = "Could not find table gaiadr9.gaia_source: the archive is in maintenance until 14:00 UTC"


class _ErrorVotable(FakeHandler):
    """A TAP endpoint that answers every query with a VOTable whose ``QUERY_STATUS`` is ``ERROR``
    (the TAP error document), with the HTTP status in ``state["status"]`` (200 or 400 both occur in the wild)."""

    def do_POST(self) -> None:  # noqa: N802
        self.record()
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<VOTABLE version="1.3" xmlns="http://www.ivoa.net/xml/VOTable/v1.3">\n'
            '  <RESOURCE type="results">\n'
            f'    <INFO name="QUERY_STATUS" value="ERROR">{SERVICE_MESSAGE}</INFO>\n'
            '  </RESOURCE>\n'
            '</VOTABLE>\n'
        ).encode()
        self.send_body(int(self.fake.state.get("status", 200)), body, "application/x-votable+xml")


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [200, 400])
async def test_a_votable_with_an_error_info_is_a_clean_error_with_the_services_message(tmp_path: Path, status: int) -> None:
    adql = "SELECT TOP 5 source_id FROM gaiadr9.gaia_source"
    with FakeServer(_ErrorVotable) as fake:
        fake.state["status"] = status
        astro = AstroApp(tap_config(tmp_path, f"{fake.url}/tap"), source="cli")
        await astro.start()
        try:
            run = await astro.run_tool("query_catalog", {"service": "local", "adql": adql})
            [record] = await astro.services.tap.repo.list()
        finally:
            await astro.close()
    assert [r.method for r in fake.requests] == ["POST"]  # the query reached the service, which refused it
    assert run.is_error
    assert SERVICE_MESSAGE in run.content and run.content.startswith("query_catalog on local failed")
    assert "Traceback" not in run.content and "DALQueryError" not in run.content and 'File "' not in run.content
    assert run.metadata["service_message"] == SERVICE_MESSAGE
    assert record.status == "error" and SERVICE_MESSAGE in record.error and record.path is None
    assert record.row_count is None and record.adql == adql
    folder = Path(astro.config.tool_results_dir) / "catalogs"
    assert not folder.exists() or not any(folder.iterdir())  # no VOTable, no partial file


@pytest.mark.asyncio
async def test_a_trusted_service_redirecting_to_a_private_address_is_refused(tmp_path: Path) -> None:
    with FakeServer(_Broken) as fake:
        fake.state["redirect"] = "http://10.0.0.1/tap/sync"
        astro = AstroApp(tap_config(tmp_path, f"{fake.url}/tap"), source="cli")
        await astro.start()
        try:
            run = await astro.run_tool("query_catalog", {"service": "local", "adql": "SELECT 1 AS one"})
        finally:
            await astro.close()
    assert run.is_error and "10.0.0.1" in run.content and "private" in run.content


@pytest.mark.asyncio
async def test_async_query_for_a_large_maxrec_streams_progress(app: AstroApp) -> None:
    seen: list[Any] = []
    run = await app.run_tool("query_catalog", {"service": "local", "maxrec": 30_000,
                                               "adql": f"SELECT TOP 30000 source_id, ra, dec FROM {STARS}"},
                             on_event=seen.append)
    assert not run.is_error, run.content
    assert run.metadata["catalog"]["mode"] == "async" and run.metadata["catalog"]["row_count"] == 30_000
    messages = [e.progress.get("message", "") for e in seen if e.type == "tool_progress"]
    job_url = re.search(r"async job (\S+):", messages[0]).group(1)
    assert any("EXECUTING" in m or "QUEUED" in m for m in messages) or len(messages) >= 1
    assert _job_gone(job_url)  # the finished job was deleted from the service


@pytest.mark.asyncio
async def test_cancel_deletes_the_async_job_and_stores_nothing(app: AstroApp) -> None:
    cancelled = asyncio.Event()
    job_urls: list[str] = []

    def on_event(event: Any) -> None:
        if event.type == "tool_progress":
            found = re.search(r"async job (\S+):", event.progress.get("message", ""))
            if found:
                job_urls.append(found.group(1))
                cancelled.set()

    slow = f"SELECT COUNT(*) AS n FROM {STARS} AS a, {STARS} AS b WHERE a.vmag < b.vmag"
    try:
        run = await app.run_tool("query_catalog", {"service": "local", "adql": slow, "maxrec": 50_000},
                                 on_event=on_event, cancelled=cancelled)
    finally:
        dachs.abort_queries()  # DaCHS deletes the job but its query runs on (see abort_queries)
    assert run.is_error and "cancel" in run.content.lower()
    assert job_urls and _job_gone(job_urls[0])
    assert await app.services.tap.repo.list() == []
    assert not any((Path(app.config.tool_results_dir) / "catalogs").glob("*"))


@pytest.mark.asyncio
async def test_a_job_past_its_deadline_is_deleted(app: AstroApp) -> None:
    urls: list[str] = []

    async def progress(message: str) -> None:
        urls.append(message.split()[2].rstrip(":"))

    slow = f"SELECT COUNT(*) AS n FROM {STARS} AS a, {STARS} AS b WHERE a.vmag < b.vmag"
    from astro_jupyter.errors import ServiceTimeoutError

    try:
        with pytest.raises(ServiceTimeoutError, match="did not finish within 1 s"):
            await app.services.tap.query("local", slow, maxrec=50_000, dest_dir=Path(app.config.home) / "c",
                                         progress=progress, deadline_secs=1.0)
    finally:
        dachs.abort_queries()
    assert urls and _job_gone(urls[0])
    [record] = await app.services.tap.repo.list()
    assert record.status == "error" and "did not finish" in record.error


@pytest.mark.asyncio
async def test_describe_catalog_lists_tables_and_columns_from_tap_schema(app: AstroApp) -> None:
    tables = await app.run_tool("describe_catalog", {"service": "local"})
    assert not tables.is_error and "astrojup.stars" in tables.content and "Synthetic stars" in tables.content
    cols = await app.run_tool("describe_catalog", {"service": "local", "table": "stars"})
    assert not cols.is_error, cols.content
    assert cols.metadata["table"] == "astrojup.stars"
    vmag = next(c for c in cols.metadata["columns"] if c["name"] == "vmag")
    assert vmag["unit"] == "mag" and vmag["ucd"] == "phot.mag;em.opt.V" and vmag["description"] == "V magnitude"
    missing = await app.run_tool("describe_catalog", {"service": "local", "table": "nosuch"})
    assert missing.is_error and "no table 'nosuch'" in missing.content
    bad = await app.run_tool("describe_catalog", {"service": "local", "table": "x'; DROP TABLE y"})
    assert bad.is_error and "not a table name" in bad.content


@pytest.mark.asyncio
async def test_cone_search_by_coordinates_finds_the_planted_stars_nearest_first(app: AstroApp) -> None:
    run = await app.run_tool("cone_search", {"service": "local", "catalog": "astrojup.stars",
                                             "ra": 187.70593, "dec": 12.39112, "radius": "1 arcmin"})
    assert not run.is_error, run.content
    rows = run.metadata["catalog"]["preview"]
    ids = [r["source_id"] for r in rows]
    assert 900000 in ids and all(900000 <= i < 900012 for i in ids)
    assert [r["dist_deg"] for r in rows] == sorted(r["dist_deg"] for r in rows) and rows[0]["source_id"] == 900000
    assert "CONTAINS(POINT('ICRS', t.ra, t.dec), CIRCLE('ICRS', 187.70593, 12.39112" in run.metadata["catalog"]["adql"]


@pytest.mark.asyncio
async def test_cone_search_by_name_resolves_it_through_sesame_and_finds_the_planted_stars_nearest_first(
        tmp_path: Path, dachs_server: dachs.DachsServer, sesame_server) -> None:
    """The by-name twin of the coordinates test: "Virgo A" is M 87's alias, known only to Sesame."""
    astro = AstroApp(tap_config(tmp_path, dachs_server.tap_url, service_urls={"sesame": sesame_server.url}), source="cli")
    await astro.start()
    try:
        run = await astro.run_tool("cone_search", {"service": "local", "catalog": STARS, "target": "Virgo A",
                                                   "radius": "1 arcmin"})
        unknown = await astro.run_tool("cone_search", {"service": "local", "catalog": STARS, "target": "Planet Nine",
                                                       "radius": "1 arcmin"})
        records = await astro.services.tap.repo.list()
    finally:
        await astro.close()
    assert not run.is_error, run.content
    assert sesame_server.names_asked[:1] == ["Virgo A"]  # the name went to Sesame, as typed
    # Sesame's position of M 87 (tests/data/sesame/m87.xml) is the cone's centre
    assert run.metadata["centre"] == {"ra": 187.70593075, "dec": 12.39112331, "target": "M 87"}
    assert "CIRCLE('ICRS', 187.70593075, 12.39112331" in run.metadata["catalog"]["adql"]
    rows = run.metadata["catalog"]["preview"]
    ids = [r["source_id"] for r in rows]
    assert 900000 in ids and all(900000 <= i < 900012 for i in ids)
    assert [r["dist_deg"] for r in rows] == sorted(r["dist_deg"] for r in rows) and rows[0]["source_id"] == 900000
    assert rows[0]["dist_deg"] < 1e-5  # the planted star sits on M 87
    assert f"{len(rows)} rows from local" in run.content or f"{len(rows)} row from local" in run.content
    # an unknown name: Sesame's "nothing found", said plainly; no query was run or stored
    assert unknown.is_error and "'Planet Nine'" in unknown.content and "found no object" in unknown.content
    assert "Traceback" not in unknown.content and "cone_search" in unknown.content
    assert "Planet Nine" in sesame_server.names_asked
    assert [r.id for r in records] == [run.metadata["result_id"]]


@pytest.mark.asyncio
async def test_cone_search_bad_arguments(app: AstroApp) -> None:
    both = await app.run_tool("cone_search", {"service": "local", "catalog": STARS, "target": "M 87", "ra": 1.0,
                                              "dec": 2.0, "radius": 10})
    assert both.is_error and "either 'target' or 'ra' and 'dec'" in both.content
    wide = await app.run_tool("cone_search", {"service": "local", "catalog": STARS, "ra": 1.0, "dec": 2.0,
                                              "radius": "30 deg"})
    assert wide.is_error and "at most 10 degrees" in wide.content
    junk = await app.run_tool("cone_search", {"service": "local", "catalog": STARS, "ra": 1.0, "dec": 2.0,
                                              "radius": "near"})
    assert junk.is_error and "not a radius" in junk.content


class _Overflowing(FakeHandler):
    """A TAP endpoint that ignores MAXREC: five rows whatever was asked."""

    def do_POST(self) -> None:  # noqa: N802
        import io

        from astropy.table import Table

        self.record()
        out = io.BytesIO()
        Table({"n": [1, 2, 3, 4, 5]}).write(out, format="votable")
        body = out.getvalue().replace(b"<TABLE", b'<INFO name="QUERY_STATUS" value="OK"/><TABLE', 1)
        self.send_body(200, body, "application/x-votable+xml")


@pytest.mark.asyncio
async def test_a_service_returning_more_rows_than_maxrec_is_not_trusted(tmp_path: Path) -> None:
    with FakeServer(_Overflowing) as fake:
        astro = AstroApp(tap_config(tmp_path, f"{fake.url}/tap"), source="cli")
        await astro.start()
        try:
            fine = await astro.run_tool("query_catalog", {"service": "local", "adql": "SELECT n FROM t", "maxrec": 5})
            run = await astro.run_tool("query_catalog", {"service": "local", "adql": "SELECT n FROM t", "maxrec": 2})
        finally:
            await astro.close()
    assert not fine.is_error and fine.metadata["catalog"]["row_count"] == 5
    assert run.is_error and "returned 5 rows although MAXREC was 2" in run.content
    stored = sorted(p.name for p in (Path(astro.config.tool_results_dir) / "catalogs").iterdir())
    assert stored == [f"{fine.metadata['result_id']}.vot"]  # the refused answer left no file, not even a part


class _Stalled(FakeHandler):
    """A TAP endpoint that takes the query and sends a first chunk of the answer, then stalls."""

    def do_POST(self) -> None:  # noqa: N802
        import threading

        self.record()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-votable+xml")
        self.end_headers()
        self.wfile.write(b"<?xml version='1.0'?><VOTABLE version='1.4'>")
        self.wfile.flush()
        self.fake.state["arrived"].set()
        release: threading.Event = self.fake.state["release"]
        release.wait(60)
        # then end the answer by closing the connection (it has no Content-Length): kept open, the
        # client's reader waited out its 120 s request timeout in the test's teardown
        self.close_connection = True


@pytest.mark.asyncio
async def test_cancelling_a_stalled_sync_query_returns_at_once_and_leaves_no_file(tmp_path: Path) -> None:
    import threading

    with FakeServer(_Stalled) as fake:
        fake.state.update(arrived=threading.Event(), release=threading.Event())
        astro = AstroApp(tap_config(tmp_path, f"{fake.url}/tap"), source="cli")
        await astro.start()
        cancelled = asyncio.Event()
        try:
            call = asyncio.ensure_future(astro.run_tool("query_catalog", {"service": "local", "adql": "SELECT 1 AS one"},
                                                        cancelled=cancelled))
            assert await asyncio.to_thread(fake.state["arrived"].wait, 30)
            cancelled.set()
            run = await asyncio.wait_for(call, 10)  # not the 120 s request timeout
            assert run.is_error and "cancel" in run.content.lower()
            assert await astro.services.tap.repo.list() == []
        finally:
            fake.state["release"].set()
            await astro.close()
    folder = Path(astro.config.tool_results_dir) / "catalogs"
    deadline = asyncio.get_running_loop().time() + 10
    while any(folder.iterdir()) and asyncio.get_running_loop().time() < deadline:  # the worker lets go of its part file
        await asyncio.sleep(0.05)
    assert not any(folder.iterdir())


class _Chunked(FakeHandler):
    """A TAP endpoint that sends its VOTable in small chunked pieces, with a comment after ``</VOTABLE>``."""

    def do_POST(self) -> None:  # noqa: N802
        import io

        from astropy.table import Table

        self.record()
        out = io.BytesIO()
        Table({"n": list(range(3000)), "name": [f"star {i}" for i in range(3000)]}).write(out, format="votable")
        body = out.getvalue().replace(b"<TABLE", b'<INFO name="QUERY_STATUS" value="OK"/><TABLE', 1)
        body += b"<!-- served in pieces -->\n"
        self.fake.state["body"] = body
        self.send_response(200)
        self.send_header("Content-Type", "application/x-votable+xml")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(0, len(body), 7000):
            piece = body[i:i + 7000]
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")


@pytest.mark.asyncio
async def test_the_answer_parsed_as_it_arrives_is_stored_byte_for_byte(tmp_path: Path) -> None:
    with FakeServer(_Chunked) as fake:
        astro = AstroApp(tap_config(tmp_path, f"{fake.url}/tap"), source="cli")
        await astro.start()
        try:
            run = await astro.run_tool("query_catalog", {"service": "local", "adql": "SELECT n, name FROM t"})
        finally:
            await astro.close()
    assert not run.is_error, run.content
    assert run.metadata["catalog"]["row_count"] == 3000 and run.metadata["catalog"]["preview"][1] == {"n": 1, "name": "star 1"}
    assert Path(run.metadata["path"]).read_bytes() == fake.state["body"]  # trailing bytes included
