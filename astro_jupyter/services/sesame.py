"""CDS Sesame name resolution: an object name → position, type, main identifier, aliases.

The client sends ``GET {sesame_url}/-oxp/~SNV?{name}`` and parses the documented XML shape::

    <Sesame><Target option="~SNV"><name>M 31</name>
      <Resolver name="S=Simbad ..."><otype/><jpos/><jradeg/><jdedeg/><MType/><oname/><alias/>...</Resolver>
      <Resolver name="N=NED ...">...</Resolver>
    </Target></Sesame>

Without the ``~`` Sesame stops at the first database that knows the name; with it every
listed database answers with its own ``<Resolver>`` block. Databases disagree on names
(Simbad's "M 31" is NED's "MESSIER 031"), so ``resolve`` asks them all and keeps the first
database's position, type and main identifier (Simbad, then NED, then VizieR) while the
aliases are merged from every database, de-duplicated, in answer order (``merge_records``).

An unknown name answers 200 with only ``<INFO>*** Nothing found ***</INFO>`` elements:
that becomes ``NotFoundError``. Resolved answers are cached in the ``sesame_cache`` table
under a key that names the query form and the normalised name (``~SNV:m31``; ``normalize_name``),
and under each alias the databases listed (``~SNV:andromeda``, ``~SNV:ngc224``), so a single-database answer never
stands in for a merged one; positions of named objects do not move on a human time scale,
so a repeated question costs one SQLite read.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..errors import NotFoundError, ServiceError, ServiceTimeoutError, StoreError

if TYPE_CHECKING:
    import httpx2

    from ..config import AstroConfig
    from ..store.db import Database

log = logging.getLogger(__name__)

_DB_NAMES = {"S": "Simbad", "N": "NED", "V": "VizieR", "A": "all"}
ALL_DATABASES = "~SNV"  # every database answers; the merge keeps Simbad's position first


@dataclass
class TargetRecord:
    name: str  # what was asked
    main_id: str  # the database's main identifier (whitespace normalised)
    ra_deg: float
    dec_deg: float
    ra_sexa: str
    dec_sexa: str
    otype: str = ""
    aliases: list[str] = field(default_factory=list)
    source_db: str = ""
    morph_type: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    databases: list[str] = field(default_factory=list)  # every database that knew the object
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clean(text: str | None) -> str:
    return re.sub(r"\s+", " ", (text or "").strip())


_CATALOGUE_WORDS = {"messier": "m"}
_CATALOGUE_NUMBER = re.compile(r"^([a-z]{1,8})\s*0*(\d+)\b")


def normalize_name(name: str) -> str:
    """The form cache keys use, so spellings of one name meet: case and spacing forgiven,
    Simbad's ``NAME``/``*`` prefixes dropped, ``M 31`` = ``M31`` = ``Messier 31`` = ``MESSIER 031``,
    ``NGC 0224`` = ``ngc224``."""
    text = _clean(name).lower()
    text = re.sub(r"^(?:name|\*{1,2})\s+", "", text)
    first, _, rest = text.partition(" ")
    if first in _CATALOGUE_WORDS and rest[:1].isdigit():
        text = f"{_CATALOGUE_WORDS[first]} {rest}"
    return _CATALOGUE_NUMBER.sub(lambda m: f"{m.group(1)}{m.group(2)}", text)


def _sexagesimal(ra_deg: float, dec_deg: float) -> tuple[str, str]:
    """Fallback when ``<jpos>`` is missing: hh:mm:ss.ss ±dd:mm:ss.s."""
    total = (ra_deg % 360.0) / 15.0 * 3600.0
    h, rem = divmod(total, 3600.0)
    m, s = divmod(rem, 60.0)
    sign = "-" if dec_deg < 0 else "+"
    d_total = abs(dec_deg) * 3600.0
    d, drem = divmod(d_total, 3600.0)
    dm, ds = divmod(drem, 60.0)
    return f"{int(h):02d}:{int(m):02d}:{s:05.2f}", f"{sign}{int(d):02d}:{int(dm):02d}:{ds:04.1f}"


def parse_sesame_xml(text: str, name: str) -> list[TargetRecord]:
    """Every resolver block of the answer that carries a position, in answer order."""
    try:
        root = ET.fromstring(text.encode("utf-8") if isinstance(text, str) else text)
    except ET.ParseError as exc:
        raise ServiceError(f"Sesame returned an unreadable answer for {name!r}: {exc}") from exc
    records: list[TargetRecord] = []
    for resolver in root.iter("Resolver"):
        ra_text, dec_text = resolver.findtext("jradeg"), resolver.findtext("jdedeg")
        if not ra_text or not dec_text:
            continue
        try:
            ra, dec = float(ra_text), float(dec_text)
        except ValueError:
            continue
        jpos = _clean(resolver.findtext("jpos"))
        if jpos and " " in jpos:
            ra_sexa, dec_sexa = jpos.split(" ", 1)
        else:
            ra_sexa, dec_sexa = _sexagesimal(ra, dec)
        code = (resolver.get("name") or "?")[:1]
        extra: dict[str, Any] = {}
        vel = resolver.find("Vel")
        if vel is not None and vel.findtext("v"):
            extra["radial_velocity_km_s"] = float(vel.findtext("v") or 0)
        if resolver.findtext("z"):
            extra["redshift"] = float(resolver.findtext("z") or 0)
        plx = resolver.find("plx")
        if plx is not None and plx.findtext("v"):
            extra["parallax_mas"] = float(plx.findtext("v") or 0)
        if resolver.findtext("nrefs"):
            extra["nrefs"] = int(resolver.findtext("nrefs") or 0)
        records.append(
            TargetRecord(
                name=name,
                main_id=_clean(resolver.findtext("oname")) or name,
                ra_deg=ra,
                dec_deg=dec,
                ra_sexa=ra_sexa,
                dec_sexa=dec_sexa,
                otype=_clean(resolver.findtext("otype")),
                aliases=[_clean(a.text) for a in resolver.findall("alias") if _clean(a.text)],
                source_db=_DB_NAMES.get(code, code),
                databases=[_DB_NAMES.get(code, code)],
                morph_type=_clean(resolver.findtext("MType")),
                extra=extra,
            )
        )
    return records


def merge_records(records: list[TargetRecord]) -> TargetRecord:
    """The first record's position, type and ids; aliases of all records, de-duplicated in order.

    Two spellings are the same alias when they differ only in whitespace or case
    ("LEDA  2557" = "LEDA 2557"); another database's main identifier ("MESSIER 031")
    counts as an alias; the first record's own main identifier is never listed as one.
    """
    if not records:
        raise ValueError("merge_records needs at least one record")
    first = records[0]
    seen = {first.main_id.lower()}
    aliases: list[str] = []
    databases: list[str] = []
    for rec in records:
        for db_name in rec.databases or [rec.source_db]:
            if db_name and db_name not in databases:
                databases.append(db_name)
        for alias in [rec.main_id, *rec.aliases]:
            alias = _clean(alias)
            if alias and alias.lower() not in seen:
                seen.add(alias.lower())
                aliases.append(alias)
    return dataclasses.replace(first, aliases=aliases, databases=databases, extra=dict(first.extra))


MAX_NAME_CHARS = 256  # the longest designations (2MASS, SDSS, Gaia DR3 ...) are under 40


class SesameClient:
    def __init__(self, http: "httpx2.AsyncClient", config: "AstroConfig", *, db: "Database | None" = None) -> None:
        self.http = http
        self.config = config
        self.db = db

    def url_for(self, name: str, databases: str = ALL_DATABASES) -> str:
        """``databases``: Sesame's option letters, ``~`` first to ask every listed database."""
        return f"{self.config.sesame_url.rstrip('/')}/-oxp/{databases}?{quote(name, safe='')}"

    @staticmethod
    def cache_key(name: str, databases: str = ALL_DATABASES) -> str:
        return f"{databases}:{normalize_name(name)}"

    @staticmethod
    def _legacy_key(name: str, databases: str) -> str:
        """The key caches written before names were normalised used (still read)."""
        return f"{databases}:{_clean(name).lower()}"

    async def fetch_xml(self, name: str, databases: str = ALL_DATABASES) -> str:
        """The raw XML answer; transport failures become our own errors with the URL in them."""
        import httpx2

        url = self.url_for(name, databases)
        try:
            resp = await self.http.get(url)
        except httpx2.TimeoutException as exc:
            raise ServiceTimeoutError(
                f"Sesame did not answer within {self.http.timeout.read:g} s for {name!r} ({url})"
            ) from exc
        except httpx2.HTTPError as exc:
            raise ServiceError(f"Cannot reach Sesame at {self.config.sesame_url} ({type(exc).__name__}: {exc})") from exc
        if resp.status_code >= 400:
            raise ServiceError(f"Sesame answered HTTP {resp.status_code} for {name!r}; try again later")
        return resp.text

    async def resolve(self, name: str, *, use_cache: bool = True, databases: str = ALL_DATABASES) -> TargetRecord:
        """The first database's answer for ``name`` with every answering database's aliases.

        ``databases="SNV"`` (no ``~``) asks only until the first database answers: cheaper,
        aliases of that database only. ``NotFoundError`` when no database knows the name.
        """
        name = _clean(name)
        if not name:
            raise NotFoundError("an empty name cannot be resolved")
        if len(name) > MAX_NAME_CHARS:  # no object is called that; the URL would be refused or worse
            raise ServiceError(f"an object name of {len(name):,} characters is not a name Sesame can resolve "
                               f"(at most {MAX_NAME_CHARS}); give the object's designation, e.g. 'M 31'")
        key = self.cache_key(name, databases)
        if use_cache and self.db is not None:
            try:
                cached = await self._cache_get(key, self._legacy_key(name, databases))
            except StoreError as exc:  # a locked or broken cache must not stop a lookup
                log.warning("sesame cache read failed: %s", exc)
                cached = None
            if cached is not None:
                cached.name = name  # found under an alias or another spelling: still what was asked
                return cached
        text = await self.fetch_xml(name, databases)
        records = parse_sesame_xml(text, name)
        if not records:
            raise NotFoundError(f"Sesame (Simbad, NED, VizieR) found no object named {name!r}")
        record = merge_records(records)
        if self.db is not None:
            try:
                await self._cache_put(key, record, databases)
            except StoreError as exc:  # e.g. a read-only library: the answer is still good
                log.warning("sesame cache write failed: %s", exc)
        return record

    # Each cache access is one hop to the database thread (``run_sync``), not three: the
    # lookup sits on every query_target call, so its cost shows in every agent turn. The read
    # goes to the reader connection, so it never queues behind a write (a stored MCP call).
    async def _cache_get(self, key: str, legacy_key: str = "") -> TargetRecord | None:
        def read(conn: Any) -> Any:
            for k in dict.fromkeys((key, legacy_key or key)):
                row = conn.execute("SELECT payload FROM sesame_cache WHERE query = ?", (k,)).fetchone()
                if row is not None:
                    return row[0]
            return None

        payload = await self.db.read_sync(read)  # type: ignore[union-attr]
        if not payload:
            return None
        try:
            data = json.loads(payload)
            data["cached"] = True
            return TargetRecord(**data)
        except (ValueError, TypeError):
            return None  # an old or foreign row shape: resolve again

    async def _cache_put(self, key: str, record: TargetRecord, databases: str = ALL_DATABASES) -> None:
        """Store under the asked name, and under the main id and every alias (``Andromeda``, ``NGC 224``)
        unless such a key is already taken: any name the databases gave answers later, also offline."""
        data = record.to_dict()
        data.pop("cached", None)
        payload = json.dumps(data, ensure_ascii=False)
        alias_keys = [self.cache_key(n, databases) for n in (record.main_id, *record.aliases) if _clean(n)]
        alias_keys = [k for k in dict.fromkeys(alias_keys) if k != key and not k.endswith(":")]

        def write(conn: Any) -> None:
            conn.execute("INSERT OR REPLACE INTO sesame_cache (query, payload) VALUES (?, ?)", (key, payload))
            conn.executemany("INSERT OR IGNORE INTO sesame_cache (query, payload) VALUES (?, ?)",
                             [(k, payload) for k in alias_keys])

        await self.db.run_sync(write)  # type: ignore[union-attr]

    async def prime_cache(self, name: str, xml_text: str, *, databases: str = ALL_DATABASES) -> TargetRecord:
        """Store a recorded Sesame answer as if it had been fetched (offline demo, fixtures).

        Stored under the key ``resolve`` reads by default, merged the same way, so a primed
        name answers exactly as a fetched one would.
        """
        records = parse_sesame_xml(xml_text, _clean(name))
        if not records:
            raise NotFoundError(f"the recorded Sesame answer for {name!r} has no position")
        if self.db is None:
            raise ServiceError("priming the Sesame cache needs the database")
        record = merge_records(records)
        await self._cache_put(self.cache_key(name, databases), record, databases)
        return record
