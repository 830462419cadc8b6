"""PDF downloads through ordered fallback channels, streamed, verified and moved in atomically.

Channels, tried in order until one yields a real PDF (each failure is kept for the result):

1. ``arxiv``     — ``{arxiv_pdf_url}/{arxiv id}``
2. ``ads``       — the ADS link resolver ``{ads_url}/resolver/{bibcode}/esource`` (needs a token);
                   each full-text link it lists, PDF link types first
3. ``doi``       — ``{doi_resolver_url}/{doi}``, following the publisher's redirects
4. ``publisher`` — the ``citation_pdf_url`` a publisher's HTML landing page (from 2 or 3) names

Bytes stream into ``ASTRO_HOME/.partial-downloads/<pid>-<random>.part`` — beside ``papers/``
on the same filesystem, so the final ``os.replace`` is atomic, but never inside it. A body
that does not start with ``%PDF-`` (an HTML landing page, a captcha) fails that channel.
Only a complete PDF is moved to ``papers/<pdf_filename(paper id)>``, so ``papers/`` never
holds a torn file, whatever happens: cancellation removes the temp file in ``finally``, and
temp files left by a killed process (pid no longer alive) are swept before the next download. Every request and
every redirect hop passes the private-address guard (``netguard.check_url``).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable
from urllib.parse import urljoin

from ..errors import AstroError, ConfigError, ServiceError, ToolInputError
from ..store.papers import PaperRecord
from .ads import http_failure
from .identifiers import parse_identifier, pdf_filename
from .netguard import BlockedAddressError, check_url

if TYPE_CHECKING:
    import httpx2

    from ..config import AstroConfig
    from .ads import AdsClient
    from .library import LibraryService

Progress = Callable[..., Awaitable[None]]
PDF_MAGIC = b"%PDF-"
MAX_REDIRECTS = 10
PROGRESS_EVERY_BYTES = 256 * 1024
_CITATION_PDF = re.compile(
    r"<meta[^>]+name=[\"']citation_pdf_url[\"'][^>]+content=[\"']([^\"']+)[\"']"
    r"|<meta[^>]+content=[\"']([^\"']+)[\"'][^>]+name=[\"']citation_pdf_url[\"']",
    re.IGNORECASE,
)


@dataclass
class ChannelAttempt:
    channel: str
    url: str
    ok: bool = False
    error: str = ""
    status: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class DownloadResult:
    paper: PaperRecord
    path: Path
    channel: str
    url: str
    size: int
    attempts: list[ChannelAttempt] = field(default_factory=list)
    already: bool = False
    notes: list[str] = field(default_factory=list)


class DownloadFailed(ServiceError):
    """Every channel failed; ``attempts`` says how each one did."""

    reason = "download_failed"

    def __init__(self, message: str, attempts: list[ChannelAttempt], paper: PaperRecord | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.paper = paper


class DownloadCancelled(AstroError):
    reason = "cancelled"


class _ChannelError(ServiceError):
    def __init__(self, message: str, *, status: int | None = None, pdf_link: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.pdf_link = pdf_link


async def _no_progress(done: int | None = None, total: int | None = None, message: str = "") -> None:
    return None


class DownloadService:
    def __init__(
        self,
        config: "AstroConfig",
        http: "httpx2.AsyncClient",
        library: "LibraryService",
        *,
        ads: "AdsClient | None" = None,
    ) -> None:
        self.config = config
        self.http = http
        self.library = library
        self.ads = ads
        self._swept = False

    @property
    def partial_dir(self) -> Path:
        return self.config.staging_dir

    def sweep_partials(self) -> int:
        """Remove temp files whose writing process is gone (a killed download). Returns how many."""
        removed = 0
        if not self.partial_dir.is_dir():
            return 0
        for path in self.partial_dir.glob("*.part"):
            pid_text = path.name.split("-", 1)[0]
            if pid_text.isdigit() and int(pid_text) != os.getpid() and _pid_alive(int(pid_text)):
                continue
            if pid_text.isdigit() and int(pid_text) == os.getpid():
                continue
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
        return removed

    async def _record_for(self, paper_id: str, notes: list[str]) -> PaperRecord:
        """The library record, fetching metadata when new; if metadata is unavailable but the
        identifier itself names a channel (arXiv id, DOI), download anyway with a bare record
        (``state == ""``: stored only once the PDF has arrived, so a failure leaves no stub row)."""
        try:
            return await self.library.resolve(paper_id)
        except ToolInputError:
            raise
        except (ServiceError, ConfigError) as exc:
            ident = parse_identifier(paper_id)
            if ident.kind not in ("arxiv", "doi", "bibcode"):
                raise
            notes.append(f"metadata lookup failed ({exc}); downloading by identifier")
            bare = PaperRecord(
                arxiv_id=ident.value if ident.kind == "arxiv" else None,
                arxiv_version=(ident.version or None) if ident.kind == "arxiv" else None,
                doi=ident.value if ident.kind == "doi" else None,
                bibcode=ident.value if ident.kind == "bibcode" else None,
                source="download",
            )
            bare.id = ident.paper_id
            return bare

    async def download(
        self,
        paper_id: str,
        *,
        progress: Progress | None = None,
        cancelled: asyncio.Event | None = None,
        force: bool = False,
    ) -> DownloadResult:
        progress = progress or _no_progress
        notes: list[str] = []
        record = await self._record_for(paper_id, notes)
        target = self.config.papers_dir / pdf_filename(record.id)
        if not force and record.pdf_path and Path(record.pdf_path).is_file():
            size = Path(record.pdf_path).stat().st_size
            return DownloadResult(record, Path(record.pdf_path), "library", "", size, already=True)
        self.config.papers_dir.mkdir(parents=True, exist_ok=True)
        self.partial_dir.mkdir(parents=True, exist_ok=True)
        if not self._swept:
            self._swept = True
            await asyncio.to_thread(self.sweep_partials)

        attempts: list[ChannelAttempt] = []
        queue: list[tuple[str, str]] = []
        if record.arxiv_id:
            queue.append(("arxiv", f"{self.config.arxiv_pdf_url.rstrip('/')}/{record.arxiv_id}"))
        ads_pending = bool(record.bibcode)
        doi_pending = bool(record.doi)
        publisher_links: list[str] = []
        while True:
            if not queue:
                if ads_pending:
                    ads_pending = False
                    queue.extend(await self._ads_links(record, attempts))
                elif doi_pending:
                    doi_pending = False
                    queue.append(("doi", f"{self.config.doi_resolver_url.rstrip('/')}/{record.doi}"))
                elif publisher_links:
                    queue.extend(("publisher", link) for link in publisher_links)
                    publisher_links = []
                else:
                    break
                continue
            channel, url = queue.pop(0)
            if any(a.url == url for a in attempts):
                continue
            attempt = ChannelAttempt(channel, url)
            attempts.append(attempt)
            await progress(done=0, total=None, message=f"{channel}: {url}")
            try:
                final_url, size = await self._fetch(url, target, channel, progress, cancelled)
            except _ChannelError as exc:
                attempt.error, attempt.status = str(exc), exc.status
                if exc.pdf_link and exc.pdf_link not in publisher_links:
                    publisher_links.append(exc.pdf_link)
                continue
            except BlockedAddressError as exc:
                attempt.error = str(exc)
                continue
            except ServiceError as exc:
                attempt.error = str(exc)
                continue
            attempt.ok = True
            if not record.state:
                record = await self.library.store(record)
            updated = await self.library.set_downloaded(record.id, target)
            return DownloadResult(updated, target, channel, final_url, size, attempts, notes=notes)

        if not attempts:
            raise DownloadFailed(
                f"no download channel for {record.id}: it has no arXiv id, bibcode or DOI", attempts, record
            )
        lines = "; ".join(f"{a.channel} ({a.url}): {a.error}" for a in attempts)
        extra = f" ({' '.join(notes)})" if notes else ""
        raise DownloadFailed(f"could not download {record.id}; every channel failed: {lines}{extra}", attempts, record)

    async def _ads_links(self, record: PaperRecord, attempts: list[ChannelAttempt]) -> list[tuple[str, str]]:
        gateway = f"{self.config.ads_url.rstrip('/')}/resolver/{record.bibcode}/esource"
        if self.ads is None or not self.ads.configured:
            attempts.append(ChannelAttempt("ads", gateway, error="skipped: ADS_API_TOKEN is not set"))
            return []
        try:
            links = await self.ads.esource_links(record.bibcode or "")
        except (ServiceError, ConfigError) as exc:
            attempts.append(ChannelAttempt("ads", gateway, error=str(exc)))
            return []
        if not links:
            attempts.append(ChannelAttempt("ads", gateway, error="ADS lists no full-text links"))
        return [(f"ads:{kind or 'link'}", url) for kind, url in links]

    async def _fetch(
        self,
        url: str,
        target: Path,
        channel: str,
        progress: Progress,
        cancelled: asyncio.Event | None,
    ) -> tuple[str, int]:
        """Stream ``url`` (redirects followed by hand, each hop guarded) into a temp file; on a real
        PDF, move it onto ``target``. Raises _ChannelError / ServiceError on failure."""
        import httpx2

        tmp = self.partial_dir / f"{os.getpid()}-{uuid.uuid4().hex}.part"
        try:
            current = url
            for _ in range(MAX_REDIRECTS + 1):
                await check_url(
                    current,
                    allow_private=False,
                    allowed_hosts=self.config.download_allowed_hosts,
                )
                try:
                    async with self.http.stream(
                        "GET",
                        current,
                        follow_redirects=False,
                        headers={"Accept": "application/pdf,text/html;q=0.5,*/*;q=0.1"},
                    ) as response:
                        location = response.headers.get("location")
                        if response.status_code in (301, 302, 303, 307, 308) and location:
                            current = urljoin(current, location)
                            continue
                        if response.status_code >= 400:
                            raise _ChannelError(f"HTTP {response.status_code}", status=response.status_code)
                        size = await self._stream_body(response, tmp, current, channel, progress, cancelled)
                except httpx2.HTTPError as exc:
                    raise http_failure(channel, exc) from exc
                except httpx2.InvalidURL as exc:  # not an HTTPError: a URL the guard let through but httpx2 cannot use
                    raise _ChannelError(f"not a valid URL: {exc}") from None
                os.replace(tmp, target)
                return current, size
            raise _ChannelError(f"more than {MAX_REDIRECTS} redirects")
        finally:
            if tmp.exists():
                tmp.unlink()

    async def _stream_body(
        self,
        response: "httpx2.Response",
        tmp: Path,
        url: str,
        channel: str,
        progress: Progress,
        cancelled: asyncio.Event | None,
    ) -> int:
        length_header = response.headers.get("content-length", "")
        total = int(length_header) if length_header.isdigit() else None
        limit = self.config.download_max_bytes
        if total is not None and total > limit:
            raise _ChannelError(f"file is {total} bytes, above the {limit}-byte limit", status=response.status_code)
        done = 0
        head = b""
        last_report = 0
        last_time = time.monotonic()
        chunks = response.aiter_bytes()
        with open(tmp, "wb") as fh:
            async for chunk in chunks:
                if cancelled is not None and cancelled.is_set():
                    raise DownloadCancelled("download cancelled")
                if len(head) < len(PDF_MAGIC):
                    head += chunk[: len(PDF_MAGIC) - len(head)]
                    if len(head) >= len(PDF_MAGIC) and not head.startswith(PDF_MAGIC):
                        await self._reject_non_pdf(response, chunks, chunk, url)
                fh.write(chunk)
                done += len(chunk)
                if done > limit:
                    raise _ChannelError(f"download exceeded the {limit}-byte limit")
                if done - last_report >= PROGRESS_EVERY_BYTES or time.monotonic() - last_time > 0.5:
                    last_report, last_time = done, time.monotonic()
                    await progress(done=done, total=total, message=f"{channel}: {done} bytes")
        if not head.startswith(PDF_MAGIC):
            await self._reject_non_pdf(response, chunks, head, url)
        if total is not None and done != total:
            raise _ChannelError(f"truncated download: {done} of {total} bytes")
        await progress(done=done, total=total or done, message=f"{channel}: done")
        return done

    async def _reject_non_pdf(
        self, response: "httpx2.Response", chunks: AsyncIterator[bytes], first: bytes, url: str
    ) -> None:
        """Fail the channel; from an HTML landing page keep the publisher's ``citation_pdf_url``."""
        ctype = response.headers.get("content-type", "unknown type").split(";")[0]
        body = first
        if "html" in ctype or first.lstrip()[:1] == b"<":
            async for chunk in chunks:
                body += chunk
                if len(body) > 1_000_000:
                    break
            match = _CITATION_PDF.search(body.decode("utf-8", "replace"))
            if match:
                link = urljoin(url, unescape(match.group(1) or match.group(2)))
                raise _ChannelError(f"not a PDF: an HTML landing page ({ctype}) naming a PDF link", pdf_link=link)
            raise _ChannelError(f"not a PDF: an HTML page ({ctype}), perhaps a landing page or captcha")
        raise _ChannelError(f"not a PDF (got {ctype}, starting {first[:16]!r})")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
