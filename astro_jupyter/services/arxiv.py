"""arXiv API client: Atom feed → ``PaperRecord``s, with one rate limiter per process.

arXiv asks clients to leave ≥ 3 s between requests; every ``ArxivClient`` in the process
(server, kernel, subagents) shares ``RATE_LIMITER``, so concurrent tools queue politely
instead of each keeping its own clock. The limiter hands out time slots under a
``threading.Lock`` and sleeps with ``asyncio.sleep``: safe across tasks, threads and event
loops (an ``asyncio.Lock`` would bind to the first loop that used it).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import NotFoundError, ServiceError
from ..store.papers import PaperRecord
from .ads import http_failure, status_failure
from .identifiers import normalize_arxiv

if TYPE_CHECKING:
    import httpx2

    from ..config import AstroConfig

NS = {
    "atom": "http://www.w3.org/2005/Atom",
    "arxiv": "http://arxiv.org/schemas/atom",
    "opensearch": "http://a9.com/-/spec/opensearch/1.1/",
}
SORTS = {"relevance": "relevance", "date": "submittedDate", "updated": "lastUpdatedDate"}
_FIELD_PREFIX = re.compile(r"\b(ti|au|abs|co|jr|cat|rn|id|all):", re.IGNORECASE)


class RateLimiter:
    """At least ``interval`` seconds between the starts of successive requests, process-wide."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0.0

    async def wait(self, interval: float) -> None:
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + max(0.0, interval)
        delay = slot - now
        if delay > 0:
            await asyncio.sleep(delay)


RATE_LIMITER = RateLimiter()
# arXiv's API terms: at most one request every three seconds. They bind arXiv's own hosts; a mirror or
# a local service named in service_urls is not held to them.
ARXIV_MIN_INTERVAL_SECS = 3.0


def default_interval(url: str) -> float:
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    return ARXIV_MIN_INTERVAL_SECS if host == "arxiv.org" or host.endswith(".arxiv.org") else 0.0


def _text(node: ET.Element | None) -> str:
    return re.sub(r"\s+", " ", node.text or "").strip() if node is not None else ""


def record_from_entry(entry: ET.Element) -> PaperRecord | None:
    """One Atom ``<entry>`` → PaperRecord; ``None`` for arXiv's error entries and empty stubs."""
    raw_id = _text(entry.find("atom:id", NS))
    title = _text(entry.find("atom:title", NS))
    if "/api/errors" in raw_id:
        raise ServiceError(f"arXiv rejected the query: {_text(entry.find('atom:summary', NS)) or title}")
    found = normalize_arxiv(re.sub(r"^https?://arxiv\.org/abs/", "", raw_id))
    if found is None or not title:
        return None
    arxiv_id, version = found
    published = _text(entry.find("atom:published", NS))
    pdf = ""
    for link in entry.findall("atom:link", NS):
        if link.get("title") == "pdf" or link.get("type") == "application/pdf":
            pdf = link.get("href", "")
    primary = entry.find("arxiv:primary_category", NS)
    categories = [c.get("term", "") for c in entry.findall("atom:category", NS) if c.get("term")]
    meta: dict[str, object] = {}
    if primary is not None and primary.get("term"):
        meta["primary_category"] = primary.get("term")
    if categories:
        meta["categories"] = categories
    comment = _text(entry.find("arxiv:comment", NS))
    if comment:
        meta["comment"] = comment
    if pdf:
        meta["pdf_url"] = pdf
    return PaperRecord(
        arxiv_id=arxiv_id,
        arxiv_version=version or None,
        doi=_text(entry.find("arxiv:doi", NS)) or None,
        title=title,
        authors=[_text(a.find("atom:name", NS)) for a in entry.findall("atom:author", NS) if _text(a.find("atom:name", NS))],
        year=int(published[:4]) if published[:4].isdigit() else None,
        journal=_text(entry.find("arxiv:journal_ref", NS)),
        abstract=_text(entry.find("atom:summary", NS)),
        url=f"https://arxiv.org/abs/{arxiv_id}",
        source="arxiv",
        metadata=meta,
    )


@dataclass
class ArxivResult:
    total: int
    records: list[PaperRecord] = field(default_factory=list)


def parse_feed(xml_text: str | bytes) -> ArxivResult:
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ServiceError(f"arXiv answered with malformed XML: {exc}") from exc
    if root.tag != f"{{{NS['atom']}}}feed":
        raise ServiceError("arXiv answered with something that is not an Atom feed")
    records = [r for r in (record_from_entry(e) for e in root.findall("atom:entry", NS)) if r is not None]
    total_text = _text(root.find("opensearch:totalResults", NS))
    return ArxivResult(int(total_text) if total_text.isdigit() else len(records), records)


# ADS field names the model tends to use in a shared query, mapped to arXiv's prefixes;
# ADS-only fields (year, bibstem, property, ...) are dropped for arXiv rather than searched as words.
_ADS_TO_ARXIV = {"author": "au", "first_author": "au", "title": "ti", "abstract": "abs", "abs": "abs", "arxiv_class": "cat"}
_TOKEN = re.compile(r'(?:([A-Za-z_]+):)?("[^"]*"|\S+)')


def build_search_query(query: str) -> str:
    """Free text → ``all:`` terms joined by AND; arXiv field prefixes pass through; ADS fields
    (``author:"Ivezić"``, ``title:LSST``) are translated, ADS-only ones (``year:2019``) dropped."""
    query = query.strip()
    if _FIELD_PREFIX.search(query) and not re.search(r"\b(author|title|abstract|year|first_author):", query, re.I):
        return query
    terms: list[str] = []
    for field_name, value in _TOKEN.findall(query):
        value = value.replace("\"^", "\"").lstrip("^")  # ADS first-author marker
        if not value or value.upper() in {"AND", "OR"}:
            continue
        if field_name:
            prefix = _ADS_TO_ARXIV.get(field_name.lower()) or (field_name.lower() if _FIELD_PREFIX.match(f"{field_name}:") else "")
            if prefix:
                terms.append(f"{prefix}:{value}")
            continue
        terms.append(f"all:{value}")
    return " AND ".join(terms)


class ArxivClient:
    def __init__(self, config: "AstroConfig", http: "httpx2.AsyncClient", *, limiter: RateLimiter = RATE_LIMITER,
                 min_interval: float | None = None) -> None:
        self.config = config
        self.http = http
        self.limiter = limiter
        self.min_interval = default_interval(config.arxiv_url) if min_interval is None else min_interval

    async def _query(self, params: dict[str, str | int]) -> ArxivResult:
        import httpx2

        await self.limiter.wait(self.min_interval)
        try:
            response = await self.http.get(self.config.arxiv_url, params=params)
        except httpx2.HTTPError as exc:
            raise http_failure("arXiv", exc) from exc
        if response.status_code >= 400:
            raise status_failure("arXiv", response, response.text[:200].strip())
        return parse_feed(response.content)

    async def search(
        self, query: str, *, max_results: int = 10, start: int = 0, sort: str = "relevance"
    ) -> ArxivResult:
        search_query = build_search_query(query)
        if not search_query:
            raise ServiceError("empty arXiv query")
        return await self._query(
            {
                "search_query": search_query,
                "start": max(0, int(start)),
                "max_results": max(1, min(int(max_results), 200)),
                "sortBy": SORTS.get(sort, "relevance"),
                "sortOrder": "descending",
            }
        )

    async def fetch(self, arxiv_ids: list[str]) -> list[PaperRecord]:
        """Records for several ids in one request (``id_list``); unknown ids are simply absent."""
        ids = [i for i in arxiv_ids if i]
        if not ids:
            return []
        result = await self._query({"id_list": ",".join(ids), "max_results": len(ids)})
        return result.records

    async def get(self, arxiv_id: str) -> PaperRecord:
        records = await self.fetch([arxiv_id])
        wanted = normalize_arxiv(arxiv_id)
        for rec in records:
            if wanted is None or rec.arxiv_id == wanted[0]:
                return rec
        raise NotFoundError(f"arXiv has no paper {arxiv_id}")
