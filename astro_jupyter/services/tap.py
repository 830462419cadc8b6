"""Catalogs over TAP (the Virtual Observatory's Table Access Protocol), through ``pyvo``.

One client for every archive that speaks TAP/ADQL (SIMBAD, VizieR, Gaia, MAST, NED, IRSA,
HEASARC, ESO ...). What this module adds to pyvo:

- **where**: a short service name is looked up in the user's ``tap_services`` and then in
  ``BUILTIN_SERVICES``; both are trusted (a configured loopback server included). Any other URL
  is untrusted: the tool asks first, and every request and redirect hop passes the private-address
  guard (``netguard``), in a ``requests`` session pyvo is handed (pyvo itself is unchanged);
- **how**: sync for small queries, an async UWS job for large ones (progress from the job's
  phase, the job deleted on cancel and past a deadline);
- **what is kept**: the service's answer is streamed to a temporary file, parsed once (the
  VOTable's own ``QUERY_STATUS`` is judged by pyvo's ``TAPResults``), then moved into place and
  recorded with its provenance in ``catalog_results``; a failure is recorded with the service's
  own error text and leaves no file.

pyvo is blocking; every network step runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

from ..errors import InvalidInput, NotAvailable, NotFoundError, ServiceError, ServiceTimeoutError
from .netguard import check_url_blocking

if TYPE_CHECKING:
    from ..config import AstroConfig
    from ..store.catalogs import CatalogRecord, CatalogRepository

# Well-known TAP services (their real endpoints); a user's ``tap_services`` may add or override names.
BUILTIN_SERVICES: dict[str, str] = {
    "simbad": "https://simbad.cds.unistra.fr/simbad/sim-tap",
    "vizier": "https://tapvizier.cds.unistra.fr/TAPVizieR/tap",
    "gaia": "https://gea.esac.esa.int/tap-server/tap",
    "mast": "https://mast.stsci.edu/vo-tap/api/v0.1/caom",
    "ned": "https://ned.ipac.caltech.edu/tap",
    "irsa": "https://irsa.ipac.caltech.edu/TAP",
    "heasarc": "https://heasarc.gsfc.nasa.gov/xamin/vo/tap",
    "eso": "https://archive.eso.org/tap_obs",
    "cadc": "https://ws.cadc-ccda.hia-iha.nrc-cnrc.gc.ca/argus",
    "gavo": "https://dc.g-vo.org/tap",
    "noirlab": "https://datalab.noirlab.edu/tap",
}

DEFAULT_MAXREC = 10_000
MAXREC_ASK_ABOVE = 100_000  # a larger maxrec needs the user's yes
MAXREC_LIMIT = 10_000_000  # never asked for, whatever the answer
SYNC_MAX_ROWS = 20_000  # above this maxrec the query runs as an async job
ASYNC_DEADLINE_SECS = 600.0
REQUEST_TIMEOUT_SECS = 120.0  # one HTTP request (a sync query, a job poll, a result download)
MAX_RESULT_BYTES = 2 * 1024**3
PREVIEW_ROWS = 50
PREVIEW_CELLS = 5_000  # the preview travels in every tool_result event: bounded for wide tables
PREVIEW_TEXT = 200  # characters of one text cell in the preview
_CHUNK = 1 << 20
RESULT_ID = re.compile(r"^cat_[0-9a-f]{16}$")  # a stored result's id: "cat_" + secrets.token_hex(8)


class TapError(ServiceError):
    """A TAP service failed (unreachable, HTTP error, a VOTable that is not one)."""

    reason = "tap_error"

    def __init__(self, message: str, *, service_message: str = "") -> None:
        super().__init__(message)
        self.service_message = service_message or message


class TapQueryError(TapError):
    """The service refused the query (ADQL syntax, unknown table or column): its own message."""

    reason = "tap_query_error"


class UnknownService(InvalidInput):
    reason = "unknown_tap_service"


class QueryCancelled(TapError):
    reason = "cancelled"


@dataclass(frozen=True)
class TapServiceRef:
    """A resolved service: what to call it, where it is, whether the user vouched for it."""

    name: str
    url: str
    trusted: bool


def _pyvo() -> Any:
    try:
        import pyvo
    except ImportError as exc:  # the `data` extra
        raise NotAvailable("catalog queries need pyvo: pip install 'astro-jupyter[data]'") from exc
    return pyvo


def is_url(text: str) -> bool:
    return bool(re.match(r"^https?://", text.strip(), re.I))


def adql_string(value: str) -> str:
    """An ADQL string literal (single quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"


def json_safe(value: Any) -> Any:
    """A table cell as JSON: masked/NaN → None, numpy scalars → Python, bytes → text, arrays → lists."""
    import numpy as np

    if value is None or value is np.ma.masked:
        return None
    if isinstance(value, np.ma.MaskedArray):
        value = value.filled(np.nan) if value.dtype.kind == "f" else value.data
    if isinstance(value, np.ndarray):
        return [json_safe(v) for v in value.ravel()[:16].tolist()]
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value[:16]]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (bool, int)):
        return value
    text = str(value)
    return text if len(text) <= PREVIEW_TEXT else text[: PREVIEW_TEXT - 1] + "…"


def preview_rows(table: Any, rows: int) -> list[dict[str, Any]]:
    """The first ``rows`` rows as JSON-safe dicts, converted column by column (row access is slow)."""
    head = table[:rows]
    columns = {name: [json_safe(v) for v in head[name].tolist()] for name in head.colnames}
    return [{name: columns[name][i] for name in head.colnames} for i in range(len(head))]


def field_meta(table: Any) -> list[dict[str, Any]]:
    cols = []
    for name in table.colnames:
        col = table[name]
        meta = getattr(col, "meta", {}) or {}
        cols.append({
            "name": name,
            "unit": str(col.unit) if col.unit is not None else None,
            "ucd": meta.get("ucd"),
            "datatype": col.dtype.name if col.dtype.kind != "O" else "object",
            "description": (col.description or "")[:200] or None,
        })
    return cols


# Position columns by name when no UCD says which: one list for the tool's result metadata (the sidebar's
# "Show on sky") and the kernel's sky view, so a table the kernel can show always offers the button.
RA_NAMES = ("ra", "raj2000", "_raj2000", "ra_icrs", "radeg", "ra_deg", "ramean", "s_ra")
DEC_NAMES = ("dec", "dej2000", "_dej2000", "de_icrs", "decj2000", "dedeg", "dec_deg", "decmean", "demean", "s_dec")


def position_columns(columns: list[dict[str, Any]]) -> dict[str, str] | None:
    """The (ra, dec) column names of a result: main-position UCDs first, then any pos.eq UCD, then names."""

    def by_ucd(target: str, main: bool) -> str | None:
        for c in columns:
            ucd = (c.get("ucd") or "").lower().split(";")
            if ucd and ucd[0] == target and (not main or "meta.main" in ucd):
                return c["name"]
        return None

    for main in (True, False):
        ra, dec = by_ucd("pos.eq.ra", main), by_ucd("pos.eq.dec", main)
        if ra and dec:
            return {"ra": ra, "dec": dec}
    lowered = {c["name"].lower(): c["name"] for c in columns}
    ra = next((lowered[n] for n in RA_NAMES if n in lowered), None)
    dec = next((lowered[n] for n in DEC_NAMES if n in lowered), None)
    return {"ra": ra, "dec": dec} if ra and dec else None


def named_services(config: "AstroConfig") -> dict[str, str]:
    """Every named service: the built-ins, then the user's (which may override a built-in name)."""
    return {**BUILTIN_SERVICES, **{k.strip().lower(): v for k, v in config.tap_services.items()}}


def resolve_service(config: "AstroConfig", service: str) -> TapServiceRef:
    """A name or URL → the service; names are case-insensitive; an unknown name lists the known ones.
    A URL equal to a named service's is that (trusted) service; any other URL is untrusted."""
    text = str(service or "").strip()
    named = named_services(config)
    if not text:
        raise UnknownService("'service' is empty: give a name (" + ", ".join(sorted(named)) + ") or a TAP URL")
    if text.lower() in named:
        return TapServiceRef(text.lower(), named[text.lower()].rstrip("/"), True)
    if is_url(text):
        url = text.rstrip("/")
        for name, known in named.items():
            if known.rstrip("/") == url:
                return TapServiceRef(name, url, True)
        return TapServiceRef(url, url, False)
    raise UnknownService(
        f"unknown TAP service {text!r}: use one of {', '.join(sorted(named))}, a TAP URL (https://...), "
        "or name it in c.AstroConfig.tap_services / ASTRO_TAP_SERVICES"
    )


@dataclass
class CatalogResult:
    """A stored query result: provenance, columns, a bounded preview, the VOTable's path."""

    record: "CatalogRecord"
    columns: list[dict[str, Any]]
    preview: list[dict[str, Any]]
    position: dict[str, str] | None

    @property
    def id(self) -> str:
        return self.record.id

    def metadata(self) -> dict[str, Any]:
        """The ``catalog`` block of a tool result (the sidebar's table, the kernel's result object)."""
        r = self.record
        return {
            "service": r.service, "service_url": r.service_url, "adql": r.adql, "row_count": r.row_count,
            "truncated": r.truncated, "maxrec": r.maxrec, "mode": r.mode, "result_id": r.id,
            "columns": [{k: c[k] for k in ("name", "unit", "ucd", "datatype")} for c in self.columns],
            "preview": self.preview, "position": self.position, "created_at": r.created_at,
        }


ProgressFn = Callable[[str], Awaitable[None]]


class _GuardedSession:
    """Builds the ``requests`` session pyvo is handed: a timeout on every request and, for an untrusted
    service, the private-address guard on every hop (each redirect is sent through ``send`` again)."""

    @staticmethod
    def make(*, guard: bool, allowed_hosts: Iterable[str], allow_private: bool, timeout: float) -> Any:
        import requests

        hosts = tuple(allowed_hosts)

        class Session(requests.Session):
            def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
                kwargs.setdefault("timeout", timeout)
                return super().request(method, url, *args, **kwargs)

            def send(self, request: Any, **kwargs: Any) -> Any:  # type: ignore[override]
                if guard:
                    check_url_blocking(request.url, allow_private=allow_private, allowed_hosts=hosts)
                kwargs["timeout"] = kwargs.get("timeout") or timeout
                return super().send(request, **kwargs)

        session = Session()
        session.headers["User-Agent"] = "astro-jupyter (pyvo)"
        return session


@dataclass(frozen=True)
class _Parsed:
    """What a worker thread hands back from a stored answer: counts, columns, the preview (not the table)."""

    row_count: int
    truncated: bool
    columns: list[dict[str, Any]]
    preview: list[dict[str, Any]]


class _Tee:
    """A read function for the VOTable parser that copies every chunk it returns to ``out``, checks
    ``stop`` between chunks and caps the size; its own failure is kept in ``failure`` (the parser may wrap it)."""

    def __init__(self, stream: Any, out: Any, stop: threading.Event) -> None:
        self.stream, self.out, self.stop = stream, out, stop
        self.size = 0
        self.failure: BaseException | None = None

    def read(self, size: int = -1) -> bytes:
        try:
            if self.stop.is_set():
                raise QueryCancelled("the query was cancelled")
            try:
                chunk = self.stream.read(size if size and size > 0 else _CHUNK)
            except Exception as exc:  # noqa: BLE001 - a dropped connection, a decoding error: one message
                raise TapError(f"reading the service's answer failed: {exc}") from exc
            self.size += len(chunk)
            if self.size > MAX_RESULT_BYTES:
                raise TapError(f"the result is larger than {MAX_RESULT_BYTES // 1024**2} MB; ask for fewer rows or columns")
            self.out.write(chunk)
            return chunk
        except BaseException as exc:
            self.failure = exc
            raise

    def drain(self) -> None:
        while self.read(_CHUNK):
            pass


class TapService:
    """TAP queries, table descriptions and result storage for every surface (``ctx.services.tap``)."""

    def __init__(self, config: "AstroConfig", repo: "CatalogRepository") -> None:
        self.config = config
        self.repo = repo

    # -- services ------------------------------------------------------------------------------
    def services(self) -> dict[str, str]:
        return named_services(self.config)

    def resolve(self, service: str) -> TapServiceRef:
        return resolve_service(self.config, service)

    def _session(self, ref: TapServiceRef) -> Any:
        from urllib.parse import urlsplit

        # A trusted service is exempt by name (the user named it, loopback included); a redirect elsewhere
        # is judged like any URL.
        host = (urlsplit(ref.url).hostname or "").lower()
        return _GuardedSession.make(
            guard=True, allowed_hosts=(host,) if ref.trusted else (),
            allow_private=False, timeout=REQUEST_TIMEOUT_SECS,
        )

    # -- queries ---------------------------------------------------------------------------------
    async def query(
        self,
        service: str,
        adql: str,
        *,
        dest_dir: Path,
        maxrec: int = DEFAULT_MAXREC,
        owner: str = "",
        session_id: str | None = None,
        progress: ProgressFn | None = None,
        cancelled: asyncio.Event | None = None,
        deadline_secs: float = ASYNC_DEADLINE_SECS,
        mode: str | None = None,
    ) -> CatalogResult:
        """Run ``adql``, store the VOTable under ``dest_dir`` and its provenance; raise on failure
        (the failure's provenance, with the service's error text, is recorded first)."""
        ref = self.resolve(service)
        adql = str(adql or "").strip()
        if not adql:
            raise InvalidInput("'adql' is empty: write an ADQL query, e.g. SELECT TOP 10 * FROM tap_schema.tables")
        if not 1 <= int(maxrec) <= MAXREC_LIMIT:
            raise InvalidInput(f"'maxrec' must be between 1 and {MAXREC_LIMIT:,}")
        mode = mode or ("sync" if maxrec <= SYNC_MAX_ROWS else "async")
        result_id = "cat_" + secrets.token_hex(8)  # matches RESULT_ID
        started = time.monotonic()
        dest_dir.mkdir(parents=True, exist_ok=True)
        tmp = dest_dir / f".{result_id}.part"
        try:
            if mode == "sync":
                parsed = await self._in_thread(self._run_sync, ref, adql, maxrec, tmp, cancelled=cancelled)
            else:
                parsed = await self._run_async(ref, adql, maxrec, tmp, progress, cancelled, deadline_secs)
        except BaseException as exc:
            tmp.unlink(missing_ok=True)
            if not isinstance(exc, (asyncio.CancelledError, QueryCancelled)):
                message = str(exc) or type(exc).__name__
                await self._record(result_id, ref, adql, maxrec, mode, owner, session_id, started, error=message)
            raise
        final = dest_dir / f"{result_id}.vot"
        os.replace(tmp, final)
        try:
            record = await self._record(
                result_id, ref, adql, maxrec, mode, owner, session_id, started,
                row_count=parsed.row_count, truncated=parsed.truncated, path=final, size=final.stat().st_size,
            )
        except BaseException:
            final.unlink(missing_ok=True)
            raise
        return CatalogResult(record, parsed.columns, parsed.preview, position_columns(parsed.columns))

    async def _record(self, result_id: str, ref: TapServiceRef, adql: str, maxrec: int, mode: str, owner: str,
                      session_id: str | None, started: float, *, error: str = "", row_count: int | None = None,
                      truncated: bool = False, path: Path | None = None, size: int | None = None) -> "CatalogRecord":
        from ..store.catalogs import CatalogRecord

        return await self.repo.add(CatalogRecord(
            id=result_id, owner=owner, session_id=session_id, service=ref.name, service_url=ref.url, adql=adql,
            maxrec=maxrec, mode=mode, status="error" if error else "ok", row_count=row_count, truncated=truncated,
            error=error[:4000], path=str(path) if path else None, bytes=size,
            duration_ms=int((time.monotonic() - started) * 1000), created_at="",
        ))

    @staticmethod
    async def _in_thread(fn: Callable[..., Any], *args: Any, cancelled: asyncio.Event | None) -> Any:
        """Run a blocking step ``fn(*args, stop)``. A cancel (the task's or ``cancelled``) returns at once:
        it sets ``stop``, which the step checks between chunks, and the step removes its own partial file
        (a stalled server must not hold the cancel for the request timeout)."""
        stop = threading.Event()
        work = asyncio.ensure_future(asyncio.to_thread(fn, *args, stop))
        watcher = asyncio.ensure_future(cancelled.wait()) if cancelled is not None else None
        try:
            done, _ = await asyncio.wait({work} | ({watcher} if watcher else set()), return_when=asyncio.FIRST_COMPLETED)
            if work in done:
                return work.result()
            stop.set()
            work.add_done_callback(_drop_result)
            raise QueryCancelled("the query was cancelled")
        except asyncio.CancelledError:
            stop.set()
            work.add_done_callback(_drop_result)
            raise
        finally:
            if watcher is not None:
                watcher.cancel()

    def _receive(self, stream: Any, tmp: Path, url: str, maxrec: int, stop: threading.Event,
                 http_error: Callable[[], BaseException | None]) -> "_Parsed":
        """Parse the answer while it arrives, writing each chunk the parser reads to ``tmp`` (so parsing
        overlaps the download, as in pyvo, and the bytes are read once and never held whole). The
        VOTable's status then decides (pyvo's rules). On any failure, a cancel included, ``tmp`` is removed."""
        from astropy.io.votable import parse as parse_votable

        try:
            with open(tmp, "wb") as out:
                tee = _Tee(stream, out, stop)
                try:
                    votable = parse_votable(tee.read, verify="ignore")
                    tee.drain()  # anything after </VOTABLE> still belongs in the stored file
                except Exception as exc:  # noqa: BLE001 - our own stop/size/read failure first, else the HTTP error
                    if tee.failure is not None:
                        raise tee.failure from None
                    error = http_error()
                    if error is not None:
                        raise _service_error(error) from exc
                    raise TapError(f"the service's answer is not a VOTable ({type(exc).__name__}: {exc})") from exc
            return self._judge(votable, url, maxrec)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    @staticmethod
    def _judge(votable: Any, url: str, maxrec: int) -> "_Parsed":
        """The parsed answer as a result (pyvo's ``TAPResults`` reads ``QUERY_STATUS``) and, in this worker
        thread rather than on the event loop, everything the caller needs from the table."""
        pyvo = _pyvo()
        try:
            results = pyvo.dal.TAPResults(votable, url=url)
        except pyvo.dal.DALQueryError as exc:
            raise TapQueryError(f"the service refused the query: {exc}", service_message=str(exc)) from exc
        except pyvo.dal.DALFormatError as exc:
            raise TapError(f"the service's VOTable holds no result table: {exc}") from exc
        table = results.to_table()
        if len(table) > maxrec:
            raise TapError(f"the service returned {len(table):,} rows although MAXREC was {maxrec:,}; not stored")
        rows = max(1, min(PREVIEW_ROWS, PREVIEW_CELLS // max(1, len(table.colnames))))  # wide tables: fewer rows
        return _Parsed(len(table), str(results.query_status).upper() == "OVERFLOW", field_meta(table),
                       preview_rows(table, rows))

    def _run_sync(self, ref: TapServiceRef, adql: str, maxrec: int, tmp: Path, stop: threading.Event) -> "_Parsed":
        pyvo = _pyvo()
        session = self._session(ref)
        try:
            query = pyvo.dal.TAPService(ref.url, session=session).create_query(adql, maxrec=maxrec)
            try:
                stream = query.execute_stream(post=True)
            except Exception as exc:  # noqa: BLE001 - requests/pyvo errors: one message
                raise _service_error(exc) from exc
            def http_error() -> BaseException | None:
                try:
                    query.raise_if_error()
                except Exception as exc:  # noqa: BLE001
                    return exc
                return None

            return self._receive(stream, tmp, query.queryurl, maxrec, stop, http_error)
        finally:
            session.close()

    async def _run_async(self, ref: TapServiceRef, adql: str, maxrec: int, tmp: Path, progress: ProgressFn | None,
                         cancelled: asyncio.Event | None, deadline_secs: float) -> "_Parsed":
        pyvo = _pyvo()
        session = self._session(ref)
        job: Any = None
        try:
            def submit() -> Any:
                found = pyvo.dal.TAPService(ref.url, session=session).submit_job(adql, maxrec=maxrec)
                found.run()
                return found

            try:
                job = await asyncio.to_thread(submit)
            except Exception as exc:  # noqa: BLE001
                raise _service_error(exc) from exc
            started = time.monotonic()
            if progress is not None:
                await progress(f"async job {job.url}: submitted")
            while True:
                # UWS 1.1 blocking poll (pyvo's wait): the service answers as soon as the phase changes,
                # or after WAIT_SLICE_SECS, when progress is reported and cancel/deadline are checked.
                waiting = asyncio.ensure_future(asyncio.to_thread(_wait_slice, pyvo, job))
                watcher = asyncio.ensure_future(cancelled.wait()) if cancelled is not None else None
                try:
                    await asyncio.wait({waiting} | ({watcher} if watcher else set()), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if watcher is not None:
                        watcher.cancel()
                if cancelled is not None and cancelled.is_set():
                    raise QueryCancelled("the query was cancelled; its job was deleted")
                try:
                    phase = waiting.result()
                except Exception as exc:  # noqa: BLE001
                    raise _service_error(exc) from exc
                if phase == "COMPLETED":
                    break
                if phase in ("ERROR", "ABORTED"):
                    message = await asyncio.to_thread(_job_error, job)
                    raise TapQueryError(f"the service's job ended {phase}: {message}", service_message=message)
                elapsed = time.monotonic() - started
                if elapsed > deadline_secs:
                    raise ServiceTimeoutError(
                        f"the async job did not finish within {deadline_secs:g} s (phase {phase}); it was deleted. "
                        "Narrow the query (TOP, a smaller region, fewer columns) or try again later"
                    )
                if progress is not None:
                    await progress(f"async job {job.url}: {phase} ({elapsed:.0f} s)")
            url = await asyncio.to_thread(lambda: job.result_uri)
            if not url:
                raise TapError("the completed job lists no result")

            def fetch(stop: threading.Event) -> _Parsed:
                try:
                    response = session.get(url, stream=True)
                    response.raise_for_status()
                except Exception as exc:  # noqa: BLE001
                    raise _service_error(exc) from exc
                response.raw.decode_content = True
                return self._receive(response.raw, tmp, url, maxrec, stop, lambda: None)

            return await self._in_thread(fetch, cancelled=cancelled)
        finally:
            if job is not None:
                await asyncio.shield(asyncio.ensure_future(asyncio.to_thread(_delete_job, job)))
            session.close()

    # -- TAP_SCHEMA ------------------------------------------------------------------------------------
    async def schema_query(self, service: str, adql: str, *, maxrec: int = 2000) -> Any:
        """A small metadata query (TAP_SCHEMA), not stored: an astropy Table."""
        ref = self.resolve(service)
        return await asyncio.to_thread(self._small_query, ref, adql, maxrec)

    def _small_query(self, ref: TapServiceRef, adql: str, maxrec: int) -> Any:
        pyvo = _pyvo()
        session = self._session(ref)
        try:
            service = pyvo.dal.TAPService(ref.url, session=session)
            try:
                return service.run_sync(adql, maxrec=maxrec).to_table()
            except pyvo.dal.DALQueryError as exc:
                raise TapQueryError(f"{ref.name} refused the query: {exc}", service_message=str(exc)) from exc
            except Exception as exc:  # noqa: BLE001
                raise _service_error(exc) from exc
        finally:
            session.close()

    async def tables(self, service: str, *, limit: int = 300) -> Any:
        return await self.schema_query(
            service, f"SELECT TOP {int(limit)} schema_name, table_name, description FROM TAP_SCHEMA.tables "
                     "ORDER BY schema_name, table_name", maxrec=limit)

    async def columns(self, service: str, table: str) -> tuple[str, Any]:
        """The columns of ``table`` (exact name, else the one table whose unqualified name matches)."""
        name = check_table_name(table)
        select = "SELECT table_name, column_name, datatype, unit, ucd, description FROM TAP_SCHEMA.columns WHERE "
        # VizieR lists its tables quoted ("I/355/gaiadr3"): an unquoted name with a slash means that one
        spellings = [name] + ([f'"{name}"'] if "/" in name and not name.startswith('"') else [])
        found = await self.schema_query(service, select + "table_name IN (" + ", ".join(map(adql_string, spellings)) + ")")
        if len(found):
            name = str(found["table_name"][0])
        if len(found) == 0 and "." not in name:
            pattern = "%." + name.replace("%", "")
            found = await self.schema_query(service, select + f"table_name LIKE {adql_string(pattern)}")
            names = sorted({str(n) for n in found["table_name"]}) if len(found) else []
            if len(names) > 1:
                raise InvalidInput(f"{table!r} names several tables on {service}: {', '.join(names)}; give the full name")
            if names:
                name = names[0]
        if len(found) == 0:
            raise NotFoundError(f"{service} has no table {table!r} in TAP_SCHEMA; describe_catalog(service=...) lists its tables")
        return name, found

    # -- stored results --------------------------------------------------------------------------------
    async def as_csv(self, path: Path) -> bytes:
        """A stored VOTable as CSV (for the sidebar's download link)."""

        def convert() -> bytes:
            import io

            from astropy.table import Table

            table = Table.read(str(path), format="votable")
            for name in table.colnames:  # CSV holds scalars: array cells become their text
                if table[name].ndim > 1:
                    table[name] = [" ".join(map(str, v)) for v in table[name]]
            out = io.StringIO()
            table.write(out, format="ascii.csv")
            return out.getvalue().encode("utf-8")

        return await asyncio.to_thread(convert)

    async def get(self, result_id: str) -> "CatalogRecord":
        try:
            return await self.repo.get(str(result_id))
        except KeyError:
            raise NotFoundError(f"no catalog result {result_id!r}") from None


_TABLE_NAME = re.compile(r'^[A-Za-z0-9_.+/\-"]{1,200}$')


def check_table_name(table: str) -> str:
    name = str(table or "").strip()
    if not _TABLE_NAME.match(name):
        raise InvalidInput(
            f"{table!r} is not a table name (letters, digits, _ . / + - and quotes only), e.g. gaiadr3.gaia_source"
        )
    return name


def _drop_result(future: "asyncio.Future[Any]") -> None:
    """Collect a cancelled step's outcome (its QueryCancelled) so asyncio does not log it."""
    if not future.cancelled():
        future.exception()


WAIT_SLICE_SECS = 2.0
_TERMINAL = {"COMPLETED", "ERROR", "ABORTED"}


def _wait_slice(pyvo: Any, job: Any) -> str:
    """The job's phase after a blocking wait of at most ``WAIT_SLICE_SECS`` (one UWS WAIT request)."""
    try:
        job.wait(phases=_TERMINAL, timeout=WAIT_SLICE_SECS)
    except pyvo.dal.DALServiceError:
        pass  # pyvo refuses to wait on an inactive job (ABORTED): the phase below says what happened
    return str(job.phase)


def _job_error(job: Any) -> str:
    try:
        job.raise_if_error()
    except Exception as exc:  # noqa: BLE001 - pyvo's DALQueryError carries the service's message
        return str(exc)
    return "no error message"


def _delete_job(job: Any) -> None:
    try:
        job.delete()
    except Exception:  # noqa: BLE001 - best effort; the service expires jobs itself
        pass


def _service_error(exc: BaseException) -> TapError:
    """A requests/pyvo failure as one readable error (the HTTP status and the service's text)."""
    import requests

    from .netguard import BlockedAddressError

    if isinstance(exc, (TapError, BlockedAddressError)):
        return exc if isinstance(exc, TapError) else TapError(str(exc))
    cause = exc
    while cause.__cause__ is not None and not isinstance(cause, requests.RequestException):
        cause = cause.__cause__
    for inner in (exc, getattr(exc, "cause", None), cause):
        if isinstance(inner, BlockedAddressError):
            return TapError(str(inner))
    if isinstance(cause, requests.Timeout) or "timed out" in str(exc).lower():
        return TapError(f"the service did not answer in time ({exc})")
    if isinstance(cause, requests.ConnectionError):
        return TapError(f"the service is unreachable ({_short(str(exc))})")
    code = getattr(exc, "code", None) or getattr(getattr(cause, "response", None), "status_code", None)
    text = _short(str(exc))
    return TapError(f"the service failed (HTTP {code}): {text}" if code else f"the service failed: {text}",
                    service_message=text)


def _short(text: str, limit: int = 600) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
