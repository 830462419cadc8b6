"""The bookmarklet intake: validate, rate-limit, queue, and work the queue in the background.

The intake is the one route reachable from other origins, so what it can do is as small
as possible: put one arXiv id / ADS bibcode / DOI (or a URL naming one) in a queue. The
worker then brings the paper into the library, downloads and parses it through the same
services the agent's tools use. A queued item is stored before the answer is sent and
items a dead server left half-done are re-queued at start, so nothing accepted is lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

from ..errors import AstroError, InvalidRequest, PermissionDenied, RateLimited
from ..services.container import ServiceContainer
from ..services.identifiers import IdentifierError, parse_identifier
from ..store.bookmarklet import BookmarkletRepository, hash_token

log = logging.getLogger(__name__)

IDLE_WAKE_SECS = 30.0
MAX_IDENTIFIER_CHARS = 2000
INTAKE_RATE_PER_MINUTE = 30  # bookmarklet requests accepted per token per minute


class RateLimiter:
    """Sliding one-minute window per key (the hash of a token), kept in memory."""

    def __init__(self, per_minute: int, *, window_secs: float = 60.0) -> None:
        self.per_minute = per_minute
        self.window = window_secs
        self._hits: dict[str, deque[float]] = {}

    def check(self, key: str, now: float | None = None) -> float:
        """0 if allowed (and counted), else the seconds to wait."""
        now = time.monotonic() if now is None else now
        hits = self._hits.setdefault(key, deque())
        while hits and now - hits[0] >= self.window:
            hits.popleft()
        if len(hits) >= self.per_minute:
            return max(0.0, self.window - (now - hits[0]))
        hits.append(now)
        return 0.0


def validate_identifier(text: Any) -> tuple[str, str]:
    """(normalised identifier, kind) for an arXiv id, bibcode, DOI or a URL naming one."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest("'identifier' must be a non-empty string", reason="invalid_identifier")
    if len(text) > MAX_IDENTIFIER_CHARS:
        raise InvalidRequest("'identifier' is too long", reason="invalid_identifier")
    try:
        ident = parse_identifier(text)
    except IdentifierError as exc:
        raise InvalidRequest(str(exc), reason="invalid_identifier") from exc
    if ident.kind == "local":
        raise InvalidRequest("only arXiv ids, ADS bibcodes and DOIs can be queued", reason="invalid_identifier")
    return ident.paper_id, ident.kind


class IntakeWorker:
    """Accepts intake requests and processes the queue one item at a time."""

    def __init__(self, services: ServiceContainer, *, rate_per_minute: int = INTAKE_RATE_PER_MINUTE) -> None:
        self.services = services
        self.repo = BookmarkletRepository(services.db)
        self.limiter = RateLimiter(rate_per_minute)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        requeued = await self.repo.requeue_interrupted()
        if requeued:
            log.info("re-queued %d bookmarklet intake item(s) left by a previous server", requeued)
        self._task = asyncio.create_task(self._loop(), name="astro-intake")
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
            self._task = None

    async def accept(self, token: str, identifier: Any, *, page_url: str = "", page_title: str = "") -> dict[str, Any]:
        owner = await self.repo.owner_for(token)
        if owner is None:
            raise PermissionDenied("unknown or revoked bookmarklet token; open astro/bookmarklet in Jupyter for a new one")
        wait = self.limiter.check(hash_token(token))
        if wait:
            raise RateLimited(
                f"more than {self.limiter.per_minute} papers a minute from this bookmarklet; try again in {wait:.0f} s",
                retry_after=wait,
            )
        paper_id, kind = validate_identifier(identifier)
        item = await self.repo.enqueue(owner, paper_id, kind, page_url=_text(page_url), page_title=_text(page_title))
        self._wake.set()
        return {"queued": True, "id": item.id, "identifier": paper_id, "kind": kind, "status": item.status}

    async def enqueue(self, owner: str, paper_id: str, kind: str) -> Any:
        """Queue a paper already validated by an authenticated route (``POST papers``)."""
        item = await self.repo.enqueue(owner, paper_id, kind)
        self._wake.set()
        return item

    async def _loop(self) -> None:
        while True:
            item = await self.repo.claim_next()
            if item is None:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=IDLE_WAKE_SECS)
                except asyncio.TimeoutError:
                    pass
                continue
            paper_id: str | None = None
            error = ""
            try:
                paper_id = await self.process(item.identifier)
            except asyncio.CancelledError:
                raise
            except AstroError as exc:
                error = str(exc) or type(exc).__name__
            except Exception as exc:  # noqa: BLE001 - one bad item must not stop the queue
                log.exception("bookmarklet intake of %s failed", item.identifier)
                error = f"{type(exc).__name__}: {exc}"
            await self.repo.finish(item.id, paper_id=paper_id, error=error)

    async def process(self, identifier: str) -> str:
        """Library entry (metadata) → PDF download → parse; each step only if its service exists."""
        services = self.services
        record = await services.library.resolve(identifier)
        paper_id = str(record.id)
        downloads = _service(services, "downloads")
        if downloads is not None:
            await downloads.download(paper_id)
        parser = _service(services, "parser") or _service(services, "parse")
        if parser is not None:
            for name in ("parse_paper", "parse"):
                method = getattr(parser, name, None)
                if method is not None:
                    await method(paper_id)
                    break
        return paper_id


def _service(services: ServiceContainer, name: str) -> Any:
    """A container service if that family has landed (a ``cached_property`` on the class)."""
    if not hasattr(type(services), name):
        return None
    return getattr(services, name)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
