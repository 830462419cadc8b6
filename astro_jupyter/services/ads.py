"""NASA ADS API client: search (``{ads_url}/search/query``), link resolver, BibTeX export; Bearer token.

ADS returns Solr documents; ``record_from_doc`` turns one into a ``PaperRecord``
(title/doi are lists there, the arXiv id hides in ``identifier`` as ``arXiv:...``).
Failures become ``ServiceError`` kinds whose message says what to do: no token names
ADS_API_TOKEN, 401 says the token was refused, 429 says when the quota resets.

ADS meters every token (a daily quota per endpoint): a 429 is retried after ``Retry-After``
(else ``X-RateLimit-Reset``) when that is near, and an answer saying ``X-RateLimit-Remaining: 0``
makes the next request wait for the reset, or fail at once without being sent when the reset is far.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..errors import ConfigError, NotFoundError, ServiceError, ServiceTimeoutError
from ..store.papers import PaperRecord
from .identifiers import PaperIdentifier, normalize_arxiv

if TYPE_CHECKING:
    import httpx2

    from ..config import AstroConfig

DEFAULT_FIELDS = (
    "bibcode,title,author,year,pub,doi,identifier,abstract,keyword,citation_count,arxiv_class,pubdate,bibstem"
)
SORTS = {
    "relevance": "score desc",
    "date": "date desc",
    "citations": "citation_count desc",
}
RATE_RETRIES = 3  # 429s retried per request before the error is the answer
RATE_WAIT_MAX_SECS = 30.0  # a longer wait (a daily quota) fails at once with the reset time instead
EXPORT_BATCH = 2000  # bibcodes per export request (the ADS export service's limit)
NO_TOKEN = "NASA ADS needs an API token: set ADS_API_TOKEN (https://ui.adsabs.harvard.edu/user/settings/token)"


_ARXIV_TO_ADS = {"au": "author", "ti": "title", "abs": "abs", "cat": "arxiv_class", "all": ""}
_ARXIV_FIELD = re.compile(r"\b(au|ti|abs|cat|all):", re.IGNORECASE)


def to_ads_query(query: str) -> str:
    """arXiv-style field prefixes (``au:Ivezic ti:LSST``) rewritten for ADS; ADS syntax passes through."""
    return _ARXIV_FIELD.sub(lambda m: f"{_ARXIV_TO_ADS[m.group(1).lower()]}:" if _ARXIV_TO_ADS[m.group(1).lower()] else "", query)


def http_failure(service: str, exc: BaseException) -> ServiceError:
    """A transport exception from httpx2 as a ServiceError kind naming the service."""
    import httpx2

    if isinstance(exc, httpx2.TimeoutException):
        return ServiceTimeoutError(f"{service} did not answer in time ({type(exc).__name__})")
    return ServiceError(f"{service} could not be reached: {type(exc).__name__}: {exc}")


def status_failure(service: str, response: "httpx2.Response", detail: str = "") -> ServiceError:
    """A non-2xx answer as a ServiceError with the reason a person can act on."""
    code = response.status_code
    detail = f": {detail}" if detail else ""
    if code == 401 or code == 403:
        return ServiceError(f"{service} refused the credentials (HTTP {code}){detail}; check ADS_API_TOKEN")
    if code == 404:
        return NotFoundError(f"{service} has no such resource (HTTP 404){detail}")
    if code == 429:
        reset = response.headers.get("X-RateLimit-Reset") or response.headers.get("Retry-After") or ""
        when = f"; quota resets at {reset}" if reset else ""
        return ServiceError(f"{service} rate limit exceeded (HTTP 429){when}")
    if code >= 500:
        return ServiceError(f"{service} server error (HTTP {code}){detail}; try again later")
    return ServiceError(f"{service} rejected the request (HTTP {code}){detail}")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def _first(value: Any) -> str:
    if isinstance(value, list):
        return str(value[0]) if value else ""
    return "" if value is None else str(value)


def record_from_doc(doc: dict[str, Any]) -> PaperRecord:
    """One ADS document → PaperRecord (missing fields stay empty; the arXiv id comes from ``identifier``)."""
    arxiv_id = version = None
    for ident in doc.get("identifier") or []:
        text = str(ident)
        if text.lower().startswith("arxiv:"):
            found = normalize_arxiv(text)
            if found:
                arxiv_id, version = found[0], found[1] or None
                break
    if arxiv_id is None:
        for ident in doc.get("identifier") or []:
            found = normalize_arxiv(str(ident))
            if found:
                arxiv_id, version = found[0], found[1] or None
                break
    year_text = _first(doc.get("year")) or _first(doc.get("pubdate"))[:4]
    bibcode = _first(doc.get("bibcode")) or None
    return PaperRecord(
        arxiv_id=arxiv_id,
        arxiv_version=version,
        doi=_first(doc.get("doi")) or None,
        bibcode=bibcode,
        title=re.sub(r"\s+", " ", _first(doc.get("title"))).strip(),
        authors=[str(a) for a in doc.get("author") or []],
        year=int(year_text) if year_text.isdigit() else None,
        journal=_first(doc.get("pub")),
        abstract=_first(doc.get("abstract")).strip(),
        keywords=[str(k) for k in doc.get("keyword") or []],
        citation_count=doc.get("citation_count"),
        url=f"https://ui.adsabs.harvard.edu/abs/{bibcode}/abstract" if bibcode else "",
        source="ads",
        metadata={
            **{k: doc[k] for k in ("arxiv_class",) if doc.get(k)},
            # every DOI and identifier ADS lists (alternate bibcodes, arXiv:...): what the answer may be matched on
            **({"alternate_ids": alternates} if (alternates := _alternate_ids(doc)) else {}),
        },
    )


def _alternate_ids(doc: dict[str, Any]) -> list[str]:
    values = [v for key in ("doi", "identifier") for v in _as_list(doc.get(key))]
    return list(dict.fromkeys(str(v) for v in values if v))


@dataclass
class AdsResult:
    num_found: int
    records: list[PaperRecord] = field(default_factory=list)


def _retry_wait(response: "httpx2.Response", attempt: int) -> float:
    """Seconds to wait before retrying a 429: ``Retry-After`` (seconds), else ``X-RateLimit-Reset``
    (epoch seconds), else 1, 2, 4 s."""
    retry_after = response.headers.get("Retry-After", "").strip()
    try:
        return max(0.0, float(retry_after))
    except ValueError:
        pass
    reset = _reset_epoch(response)
    return max(0.0, reset - time.time()) if reset is not None else float(2**attempt)


def _reset_epoch(response: "httpx2.Response") -> float | None:
    try:
        return float(response.headers.get("X-RateLimit-Reset", ""))
    except ValueError:
        return None


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


class AdsClient:
    def __init__(self, config: "AstroConfig", http: "httpx2.AsyncClient") -> None:
        self.config = config
        self.http = http
        self._quota_reset: dict[str, float] = {}  # endpoint → reset epoch, when ADS said X-RateLimit-Remaining: 0

    @property
    def configured(self) -> bool:
        return bool(self.config.ads_token)

    @property
    def base(self) -> str:
        return self.config.ads_url.rstrip("/")

    def _headers(self) -> dict[str, str]:
        if not self.config.ads_token:
            raise ConfigError(NO_TOKEN)
        return {"Authorization": f"Bearer {self.config.ads_token}", "Accept": "application/json"}

    async def _get_json(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self._request_json("GET", path, params=params)

    async def _wait_for_quota(self, endpoint: str) -> None:
        """Hold a request while the endpoint's last answer said its quota is spent (ADS meters each
        endpoint apart); refuse it at once when the reset is far."""
        reset = self._quota_reset.get(endpoint)
        if reset is None:
            return
        wait = reset - time.time()
        if wait > RATE_WAIT_MAX_SECS:
            raise ServiceError(f"NASA ADS rate limit reached (X-RateLimit-Remaining: 0); the quota resets at {_when(reset)}")
        if wait > 0:
            await asyncio.sleep(wait)
        self._quota_reset.pop(endpoint, None)

    def _note_quota(self, endpoint: str, response: "httpx2.Response") -> None:
        reset = _reset_epoch(response)
        if response.headers.get("X-RateLimit-Remaining", "").strip() == "0" and reset is not None:
            self._quota_reset[endpoint] = reset

    async def _request_json(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                            body: Any = None) -> dict[str, Any]:
        """One ADS call: the quota respected, 429 retried after the wait ADS names, JSON object back."""
        import httpx2

        headers = self._headers()
        endpoint = path.strip("/").split("/", 1)[0]  # search, export, resolver
        for attempt in range(RATE_RETRIES + 1):
            await self._wait_for_quota(endpoint)
            try:
                response = await self.http.request(
                    method, f"{self.base}{path}", params=params, json=body, headers=headers,
                )
            except httpx2.HTTPError as exc:
                raise http_failure("NASA ADS", exc) from exc
            self._note_quota(endpoint, response)
            if response.status_code == 429 and attempt < RATE_RETRIES:
                wait = _retry_wait(response, attempt)
                if wait <= RATE_WAIT_MAX_SECS:
                    self._quota_reset.pop(endpoint, None)  # the wait below is the one ADS asked for
                    await asyncio.sleep(wait)
                    continue
            break
        if response.status_code >= 400:
            raise status_failure("NASA ADS", response, _error_detail(response))
        try:
            payload = response.json()
        except ValueError as exc:
            raise ServiceError("NASA ADS answered with something that is not JSON") from exc
        if not isinstance(payload, dict):
            raise ServiceError("NASA ADS answered with an unexpected JSON shape")
        return payload

    async def search(
        self, q: str, *, rows: int = 10, start: int = 0, sort: str = "relevance", fl: str = DEFAULT_FIELDS
    ) -> AdsResult:
        """Run a Solr query (ADS syntax: ``author:"Ivezić"``, ``year:2020-2023``, free text)."""
        params = {"q": q, "fl": fl, "rows": max(1, min(int(rows), 200)), "start": max(0, int(start))}
        params["sort"] = SORTS.get(sort, sort or "score desc")
        payload = await self._get_json("/search/query", params)
        response = payload.get("response") or {}
        docs = response.get("docs") or []
        return AdsResult(int(response.get("numFound") or len(docs)), [record_from_doc(d) for d in docs])

    async def get(self, ident: PaperIdentifier) -> PaperRecord:
        """The ADS record for an arXiv id, DOI or bibcode; ``NotFoundError`` if ADS has none."""
        if ident.kind == "arxiv":
            q = f'identifier:"arXiv:{ident.value}"'
        elif ident.kind == "doi":
            q = f'doi:"{ident.value}"'
        elif ident.kind == "bibcode":
            q = f'bibcode:"{ident.value}"'
        else:
            raise NotFoundError(f"ADS cannot look up a {ident.kind} id")
        result = await self.search(q, rows=1)
        if not result.records:
            raise NotFoundError(f"NASA ADS found no paper for {ident.kind} {ident.value}")
        return result.records[0]

    async def references(self, bibcode: str, *, rows: int = 20) -> AdsResult:
        """Papers the given paper cites."""
        return await self.search(f"references(bibcode:{bibcode})", rows=rows, sort="date")

    async def citations(self, bibcode: str, *, rows: int = 20) -> AdsResult:
        """Papers citing the given paper."""
        return await self.search(f"citations(bibcode:{bibcode})", rows=rows, sort="date")

    async def esource_links(self, bibcode: str) -> list[tuple[str, str]]:
        """Full-text links from the ADS link resolver (``/resolver/{bibcode}/esource``), PDFs first."""
        payload = await self._get_json(f"/resolver/{quote(bibcode, safe='')}/esource")  # A&A bibcodes hold '&'
        links: list[tuple[str, str]] = []
        if payload.get("link"):
            links.append((str(payload.get("link_type") or "ESOURCE"), str(payload["link"])))
        records = (payload.get("links") or {}).get("records") or []
        for rec in records:
            if isinstance(rec, dict) and rec.get("url"):
                links.append((str(rec.get("link_type") or rec.get("type") or ""), str(rec["url"])))
        links.sort(key=lambda item: 0 if item[0].upper().endswith("PDF") else 1)
        return links

    async def export_bibtex(self, bibcodes: list[str]) -> str:
        """BibTeX for ``bibcodes`` from the export service (``POST /export/bibtex``), as ADS wrote it.

        ADS answers ``{"msg": "Retrieved N abstracts...", "export": "@ARTICLE{...}"}`` and leaves out
        bibcodes it does not know; a request where none is known is a 404. The caller checks which
        records came back."""
        parts: list[str] = []
        for start in range(0, len(bibcodes), EXPORT_BATCH):
            payload = await self._request_json("POST", "/export/bibtex", body={"bibcode": bibcodes[start : start + EXPORT_BATCH]})
            export = payload.get("export")
            if not isinstance(export, str):
                raise ServiceError("NASA ADS export answered without BibTeX (no 'export' text in the JSON)")
            parts.append(export)
        return "\n".join(parts)


def _error_detail(response: "httpx2.Response") -> str:
    try:
        payload = response.json()
    except ValueError:
        return response.text[:200].strip()
    if isinstance(payload, dict):
        err = payload.get("error") or payload.get("message") or ""
        if isinstance(err, dict):
            err = err.get("msg") or err.get("message") or ""
        return str(err)[:300]
    return ""
