"""The paper library: what papers we know, where their PDF/Markdown lives, how far along each is.

Every paper tool and the ``library`` CLI go through here, so that one identifier scheme
(``services/identifiers.py``) and one status vocabulary hold everywhere:

- ``state`` (stored): ``metadata`` → ``downloaded`` (``pdf_path`` set) → ``parsed``
  (``markdown_path`` set, chunks stored by the parse service);
- local status of a search hit: ``not_downloaded`` (unknown or metadata only),
  ``downloaded``, ``parsed``.

Stable API used by the parse/RAG side: ``get``, ``resolve``, ``set_state``,
``set_downloaded``, ``set_parsed`` and ``PaperRecord.pdf_path``/``markdown_path``.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, NotFoundError, PermissionDenied, ServiceError, StoreError, ToolInputError
from ..store.papers import STATES, PaperRecord, PaperRepository
from ..store.repository import PaperStore
from .identifiers import (
    IdentifierError,
    PaperIdentifier,
    normalize_arxiv,
    parse_identifier,
    paper_id_for,
    pdf_filename,
    slugify,
)
from .parse.text import expand_ligatures
from .pdf_lock import PYMUPDF_LOCK

if TYPE_CHECKING:
    from ..config import AstroConfig
    from ..store.db import Database
    from .ads import AdsClient
    from .arxiv import ArxivClient

_ARXIV_STAMP = re.compile(r"arXiv:\s*(\d{4}\.\d{4,5}(?:v\d+)?|[a-z\-]+(?:\.[A-Z]{2})?/\d{7}(?:v\d+)?)")
_DOI_IN_TEXT = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>,;]+[^\s\"<>,;.)])")


def record_matches(record: PaperRecord, ident: PaperIdentifier) -> bool:
    """Whether a service's answer is the paper asked for: the asked identifier (arXiv id without
    version, DOI case-insensitively, bibcode) must be among the record's own. Services answer
    fuzzy queries with the nearest paper; taking that as the asked one gives a PDF a stranger's identity."""
    alternates = [str(a) for a in (record.metadata or {}).get("alternate_ids") or []]
    if ident.kind == "arxiv":
        found = {normalize_arxiv(a) for a in [record.arxiv_id or "", *alternates]}
        return any(f is not None and f[0] == ident.value for f in found)
    if ident.kind == "doi":
        return ident.value.lower() in {d.strip().lower() for d in [record.doi or "", *alternates] if d}
    if ident.kind == "bibcode":
        return ident.value in {record.bibcode or "", *alternates}
    return False


def _describe_ids(record: PaperRecord) -> str:
    ids = [f"arXiv {record.arxiv_id}" if record.arxiv_id else "", f"DOI {record.doi}" if record.doi else "",
           f"bibcode {record.bibcode}" if record.bibcode else ""]
    title = f" {record.title[:80]!r}" if record.title else ""
    return (", ".join(i for i in ids if i) or "no identifiers") + title


def local_status(record: PaperRecord | None) -> str:
    """``not_downloaded`` | ``downloaded`` | ``parsed`` — what a search hit shows."""
    if record is None or record.state in ("", "metadata"):
        return "not_downloaded"
    return record.state


@dataclass
class Unsearchable:
    """Papers ``rag_search`` cannot see: ``unparsed`` (first few of ``unparsed_total``) have a PDF
    and no parse; ``metadata_only`` papers have no text at all."""

    unparsed: list[PaperRecord]
    unparsed_total: int
    metadata_only: int

    def note(self) -> str:
        """One line for a search result; empty when everything in the library is searchable."""
        if not self.unparsed_total:
            return ""
        names = ", ".join(f"{p.id} ({(p.title or '').strip()[:60] or 'untitled'})" for p in self.unparsed[:5])
        more = f" and {self.unparsed_total - 5} more" if self.unparsed_total > 5 else ""
        n = self.unparsed_total
        return (f"Not searchable yet: {n} paper{'s' if n != 1 else ''} in the library {'are' if n != 1 else 'is'} "
                f"downloaded but not parsed: {names}{more}. Parse {'them' if n != 1 else 'it'} with parse_paper "
                f"to search {'their' if n != 1 else 'its'} text.")


@dataclass
class AddOutcome:
    record: PaperRecord
    already: bool  # the paper (this PDF, or this identifier) was in the library before


class LibraryService:
    def __init__(
        self,
        config: "AstroConfig",
        db: "Database",
        *,
        ads: "AdsClient | None" = None,
        arxiv: "ArxivClient | None" = None,
        papers: "PaperStore | None" = None,
    ) -> None:
        self.config = config
        self.papers: PaperStore = papers if papers is not None else PaperRepository(db)
        self.ads = ads
        self.arxiv = arxiv

    # -- lookups ---------------------------------------------------------------------
    async def find(self, identifier: str) -> PaperRecord | None:
        """A stored paper by library id or any identifier; ``None`` when not in the library."""
        text = (identifier or "").strip()
        if not text:
            return None
        record = await self.papers.find(text)
        if record is not None:
            return record
        try:
            ident = parse_identifier(text)
        except IdentifierError:
            return None
        return await self.find_identifier(ident)

    async def find_identifier(self, ident: PaperIdentifier) -> PaperRecord | None:
        if ident.kind == "local":
            return await self.papers.find(ident.paper_id)
        record = await self.papers.find(ident.paper_id)
        if record is not None:
            return record
        return await self.papers.find_by(
            arxiv_id=ident.value if ident.kind == "arxiv" else None,
            doi=ident.value if ident.kind == "doi" else None,
            bibcode=ident.value if ident.kind == "bibcode" else None,
        )

    async def get(self, paper_id: str) -> PaperRecord:
        """A stored paper by library id or any identifier; ``NotFoundError`` if absent (no network)."""
        record = await self.find(paper_id)
        if record is None:
            raise NotFoundError(
                f"paper {paper_id!r} is not in the library (add it with download_paper or `astro-jupyter library add`)"
            )
        return record

    async def list(self, *, state: str | None = None, limit: int = 1000) -> list[PaperRecord]:
        return await self.papers.list(state=state, limit=limit)

    async def annotate(self, hits: list[PaperRecord]) -> dict[int, PaperRecord]:
        """Map ``id(hit)`` → stored paper for every hit already in the library (one query)."""
        stored = await self.papers.find_many(
            arxiv_ids=[h.arxiv_id for h in hits if h.arxiv_id],
            dois=[h.doi for h in hits if h.doi],
            bibcodes=[h.bibcode for h in hits if h.bibcode],
        )
        found: dict[int, PaperRecord] = {}
        for hit in hits:
            for rec in stored:
                if (
                    (hit.arxiv_id and hit.arxiv_id == rec.arxiv_id)
                    or (hit.doi and rec.doi and hit.doi.lower() == rec.doi.lower())
                    or (hit.bibcode and hit.bibcode == rec.bibcode)
                ):
                    found[id(hit)] = rec
                    break
        return found

    # -- resolving (may use the network) -------------------------------------------------------
    async def resolve(self, identifier: str, *, fetch: bool = True) -> PaperRecord:
        """The library entry for ``identifier``, fetching metadata from arXiv/ADS and storing it
        (state ``metadata``) when the paper is not yet known."""
        record = await self.find(identifier)
        if record is not None:
            return record
        try:
            ident = parse_identifier(identifier)
        except IdentifierError as exc:
            raise ToolInputError(str(exc)) from exc
        if ident.kind == "local" or not fetch:
            raise NotFoundError(f"paper {identifier!r} is not in the library")
        fetched = await self.fetch_metadata(ident)
        return await self.store(fetched)

    async def fetch_metadata(self, ident: PaperIdentifier) -> PaperRecord:
        """Metadata from the remote services: ADS preferred when configured, arXiv fills gaps."""
        errors: list[str] = []
        not_found = 0
        ads_rec: PaperRecord | None = None
        arxiv_rec: PaperRecord | None = None
        if self.ads is not None and self.ads.configured:
            try:
                ads_rec = await self.ads.get(ident)
            except ServiceError as exc:
                errors.append(f"ADS: {exc}")
                not_found += isinstance(exc, NotFoundError)
            if ads_rec is not None and not record_matches(ads_rec, ident):
                errors.append(f"ADS: answered with a different paper ({_describe_ids(ads_rec)}); ignored")
                not_found += 1
                ads_rec = None
        arxiv_id = ident.value if ident.kind == "arxiv" else (ads_rec.arxiv_id if ads_rec else None)
        if arxiv_id and self.arxiv is not None:
            try:
                arxiv_rec = await self.arxiv.get(arxiv_id)
            except ServiceError as exc:
                errors.append(f"arXiv: {exc}")
                not_found += isinstance(exc, NotFoundError)
            if arxiv_rec is not None and not record_matches(arxiv_rec, PaperIdentifier("arxiv", arxiv_id)):
                errors.append(f"arXiv: answered with a different paper ({_describe_ids(arxiv_rec)}); ignored")
                not_found += 1
                arxiv_rec = None
        if ads_rec is None and arxiv_rec is None:
            if ident.kind in ("doi", "bibcode") and (self.ads is None or not self.ads.configured):
                raise ConfigError(
                    f"looking up {ident.kind} {ident.value!r} needs NASA ADS: set ADS_API_TOKEN "
                    "(or pass an arXiv id instead)"
                )
            detail = "; ".join(errors) or "no source knows it"
            if not_found < len(errors):
                raise ServiceError(f"could not fetch metadata for {ident}: {detail}")
            raise NotFoundError(f"no paper found for {ident}: {detail}")
        if ads_rec is not None:
            if arxiv_rec is not None:
                ads_rec.merge_from(arxiv_rec)
                ads_rec.arxiv_version = arxiv_rec.arxiv_version or ads_rec.arxiv_version
            record = ads_rec
        else:
            assert arxiv_rec is not None
            record = arxiv_rec
        if ident.kind == "arxiv" and ident.version:
            record.arxiv_version = ident.version
        if errors:
            record.metadata.setdefault("fetch_errors", errors)
        return record

    async def store(self, record: PaperRecord) -> PaperRecord:
        """Insert or merge a fetched record (existing ids and local state are kept)."""
        existing = await self.papers.find_by(arxiv_id=record.arxiv_id, doi=record.doi, bibcode=record.bibcode)
        if existing is not None:
            return await self._merge_into(existing, record)
        record.id = record.id or paper_id_for(record.arxiv_id, record.doi, record.bibcode) or ""
        if not record.id:
            raise ToolInputError("a paper needs an arXiv id, DOI, bibcode or a local file")
        record.state = record.state or "metadata"
        try:
            return await self.papers.insert(record)
        except StoreError:
            # A concurrent call stored the same paper first: merge into that one.
            existing = await self.papers.find(record.id) or await self.papers.find_by(
                arxiv_id=record.arxiv_id, doi=record.doi, bibcode=record.bibcode
            )
            if existing is None:
                raise
            return await self._merge_into(existing, record)

    async def _merge_into(
        self, existing: PaperRecord, fetched: PaperRecord, *, prefer_fetched: bool | None = None
    ) -> PaperRecord:
        """Merge into a stored paper. Fresh remote metadata refreshes a metadata-only entry by
        default; a local PDF's own metadata only fills gaps (``prefer_fetched=False``)."""
        before = existing.to_dict()
        if prefer_fetched is None:
            prefer_fetched = existing.state == "metadata" and existing.source != "local"
        existing.merge_from(fetched, prefer_other=prefer_fetched)
        changes = {k: v for k, v in existing.to_dict().items() if before.get(k) != v and k not in ("id",)}
        # Never let a merge steal an identifier another stored paper already owns.
        for column in ("arxiv_id", "doi", "bibcode"):
            if column in changes:
                other = await self.papers.find_by(**{column: changes[column]})
                if other is not None and other.id != existing.id:
                    changes.pop(column)
        if not changes:
            return existing
        return await self.papers.update(existing.id, **changes)

    # -- adding ------------------------------------------------------------------------------------
    async def add(self, identifier_or_path: str, *, fetch: bool = True) -> PaperRecord:
        """Bring a paper into the library: a local PDF (copied into papers/) or any identifier."""
        return (await self.add_checked(identifier_or_path, fetch=fetch)).record

    async def add_checked(self, identifier_or_path: str, *, fetch: bool = True) -> "AddOutcome":
        """``add``, also telling whether the paper was already there, so a second add says so
        instead of claiming to have added it again."""
        text = (identifier_or_path or "").strip()
        path = Path(text).expanduser()
        if not text.lower().startswith(("http://", "https://")) and path.is_file():
            digest = await asyncio.to_thread(_sha256, path)
            same = await self.papers.find_by_sha256(digest)
            if same is not None and same.pdf_path and Path(same.pdf_path).is_file():
                return AddOutcome(same, already=True)
        else:
            known = await self.find(text)
            if known is not None:
                return AddOutcome(known, already=True)
        return AddOutcome(await self._add(text, fetch=fetch), already=False)

    async def _add(self, text: str, *, fetch: bool) -> PaperRecord:
        path = Path(text).expanduser()
        if text.lower().endswith(".pdf") and not text.lower().startswith(("http://", "https://")):
            if not path.is_file():
                raise ToolInputError(f"no such PDF file: {text}")
            return await self.add_pdf(path, fetch=fetch)
        if path.is_file():
            return await self.add_pdf(path, fetch=fetch)
        return await self.resolve(text, fetch=fetch)

    async def add_pdf(self, path: Path, *, fetch: bool = True, paper_id: str | None = None,
                      info: dict[str, Any] | None = None, digest: str = "") -> PaperRecord:
        """Copy a local PDF in; metadata from the PDF, upgraded from arXiv/ADS if it names an id.

        ``paper_id`` (a ``local:`` id) gives a known local paper a stable id (the demo's samples).
        ``info`` / ``digest``: ``read_pdf_info`` and the content hash, when a bulk-ingest worker read them."""
        info = info if info is not None else await asyncio.to_thread(read_pdf_info, path)
        digest = digest or await asyncio.to_thread(_sha256, path)
        same = await self.papers.find_by_sha256(digest)
        if same is not None and same.pdf_path and Path(same.pdf_path).is_file():
            return same
        record = PaperRecord(
            title=info["title"],
            authors=info["authors"],
            year=info["year"],
            keywords=info["keywords"],
            source="local",
            metadata={"original_path": str(path.resolve()), "pages": info["pages"], "sha256": digest},
        )
        ident: PaperIdentifier | None = None
        if info["arxiv"]:
            ident = parse_identifier(info["arxiv"])
            record.arxiv_id, record.arxiv_version = ident.value, ident.version or None
        elif info["doi"]:
            ident = parse_identifier(info["doi"])
            record.doi = ident.value if ident.kind == "doi" else None
            if ident.kind == "arxiv":
                record.arxiv_id = ident.value
        if ident is not None and fetch:
            try:
                remote = await self.fetch_metadata(ident)
                record.merge_from(remote, prefer_other=True)
                record.source = "local"
            except Exception as exc:  # noqa: BLE001 - the PDF's own metadata is a fine fallback
                record.metadata["fetch_error"] = str(exc)
        existing = await self.papers.find_by(arxiv_id=record.arxiv_id, doi=record.doi, bibcode=record.bibcode)
        if existing is None and paper_id is not None:
            if not paper_id.startswith("local:") or parse_identifier(paper_id).kind != "local":
                raise ToolInputError(f"a stable id for a local PDF must be a 'local:' id, not {paper_id!r}")
            existing = await self.papers.find(paper_id)
        paper_id = existing.id if existing else (
            paper_id
            or paper_id_for(record.arxiv_id, record.doi, record.bibcode)
            or await self._free_local_id(slugify(record.title or path.stem))
        )
        self.config.papers_dir.mkdir(parents=True, exist_ok=True)
        target = self.config.papers_dir / pdf_filename(paper_id)
        # Copy beside papers/ (same filesystem) and move in atomically: papers/ never holds half a file.
        staging = self.config.staging_dir
        staging.mkdir(parents=True, exist_ok=True)
        tmp = staging / f"{os.getpid()}-{uuid.uuid4().hex}.part"
        try:
            await asyncio.to_thread(shutil.copyfile, path, tmp)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        if existing is not None:
            merged = await self._merge_into(existing, record, prefer_fetched=ident is not None and fetch
                                            and "fetch_error" not in record.metadata)
            return await self.set_downloaded(merged.id, target)
        record.id = paper_id
        record.pdf_path = str(target)
        record.state = "downloaded"
        try:
            return await self.papers.insert(record)
        except StoreError:
            # someone added the same paper at the same moment (a shared library): theirs is the copy
            same = (await self.papers.find_by_sha256(digest) or await self.papers.find(record.id)
                    or await self.papers.find_by(arxiv_id=record.arxiv_id, doi=record.doi, bibcode=record.bibcode))
            if same is None:
                raise
            if same.pdf_path != str(target):
                target.unlink(missing_ok=True)  # the copy made under the id that lost
            return same

    async def _free_local_id(self, slug: str) -> str:
        candidate, n = f"local:{slug}", 2
        while await self.papers.find(candidate) is not None:
            candidate, n = f"local:{slug}-{n}", n + 1
        return candidate

    # -- state changes (download and parse services call these) ----------------------------------------
    async def set_state(self, paper_id: str, state: str, **fields: Any) -> PaperRecord:
        if state not in STATES:
            raise ValueError(f"state must be one of {STATES}, not {state!r}")
        record = await self.get(paper_id)
        return await self.papers.update(record.id, state=state, **fields)

    async def set_downloaded(self, paper_id: str, pdf_path: str | Path) -> PaperRecord:
        record = await self.get(paper_id)
        state = "parsed" if record.state == "parsed" and record.pdf_path == str(pdf_path) else "downloaded"
        return await self.papers.update(record.id, state=state, pdf_path=str(pdf_path))

    async def set_parsed(self, paper_id: str, markdown_path: str | Path | None = None, **fields: Any) -> PaperRecord:
        record = await self.get(paper_id)
        changes: dict[str, Any] = {"state": "parsed", **fields}
        if markdown_path is not None:
            changes["markdown_path"] = str(markdown_path)
        return await self.papers.update(record.id, **changes)

    async def update(self, paper_id: str, **fields: Any) -> PaperRecord:
        record = await self.get(paper_id)
        return await self.papers.update(record.id, **fields)

    async def remove(self, paper_id: str) -> PaperRecord:
        """Delete a paper's row and the files the library made for it (its PDF copy, its Markdown).

        Only files inside ``papers/`` are deleted: a local PDF was copied in, and the user's
        original stays where it was. Chunks go first, through the parse side (``app.remove_paper``)."""
        record = await self.get(paper_id)
        await self.check_removable(record)
        await self.papers.delete(record.id)
        papers_dir = self.config.papers_dir.resolve()
        for name in (record.pdf_path, record.markdown_path):
            if not name:
                continue
            path = Path(name)
            if path.resolve().parent == papers_dir:
                path.unlink(missing_ok=True)
        return record

    async def check_removable(self, record: PaperRecord) -> None:
        """``PermissionDenied`` when this user may not remove the paper (a shared library's paper
        someone else added; only they or a library administrator may)."""
        refused = await self.papers.removal_refused(record)
        if refused:
            raise PermissionDenied(refused)

    async def not_searchable(self, limit: int = 20) -> "Unsearchable":
        """What retrieval cannot find yet: papers with a PDF that were never parsed (listed), and how
        many are known by metadata only (no text at all)."""
        counts = await self.papers.count_by_state()
        unparsed = await self.papers.list(state="downloaded", limit=limit)
        return Unsearchable(unparsed, counts.get("downloaded", 0), counts.get("metadata", 0))


def read_pdf_info(path: Path) -> dict[str, Any]:
    """Title/authors/year/keywords from the PDF's metadata, else from the first page's largest text;
    an arXiv id or DOI printed on the first page when there is one. Runs in a thread."""
    import pymupdf  # lazy: pymupdf is heavy and only local adds need it

    with open(path, "rb") as fh:
        if b"%PDF-" not in fh.read(1024):  # pymupdf would happily open a text or image file
            raise ToolInputError(f"{path.name} is not a readable PDF: it does not start with %PDF-")
    with PYMUPDF_LOCK:  # MuPDF is not thread-safe; a parse may be running in another thread
        return _read_pdf_info_locked(path, pymupdf)


def _read_pdf_info_locked(path: Path, pymupdf: Any) -> dict[str, Any]:
    try:
        doc = pymupdf.open(str(path))
    except Exception as exc:  # noqa: BLE001 - any open failure means "not a usable PDF"
        raise ToolInputError(f"{path.name} is not a readable PDF: {exc}") from exc
    with doc:
        if doc.needs_pass:
            raise ToolInputError(f"{path.name} is encrypted; decrypt it before adding it to the library")
        if doc.page_count == 0:
            raise ToolInputError(f"{path.name} has no pages: there is nothing in it to read or search")
        meta = doc.metadata or {}
        first_text = doc[0].get_text() if doc.page_count else ""
        title = expand_ligatures((meta.get("title") or "").strip()) or (_largest_text(doc[0]) if doc.page_count else "")
        authors = [a.strip() for a in re.split(r";|,| and ", meta.get("author") or "") if a.strip()]
        year_match = re.match(r"D:(\d{4})", meta.get("creationDate") or "")
        keywords = [k.strip() for k in re.split(r"[;,]", meta.get("keywords") or "") if k.strip()]
        arxiv = _ARXIV_STAMP.search(first_text)
        doi = _DOI_IN_TEXT.search(first_text)
        return {
            "title": title or path.stem,
            "authors": authors,
            "year": int(year_match.group(1)) if year_match else None,
            "keywords": keywords,
            "arxiv": arxiv.group(1) if arxiv else "",
            "doi": doi.group(1) if doi else "",
            "pages": doc.page_count,
        }


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _largest_text(page: Any) -> str:
    """The run of lines set in the page's largest font: on a first page, that is the title."""
    spans: list[tuple[float, str, int]] = []
    top_limit = page.rect.height * 0.3
    import pymupdf

    # ligatures expanded ("ﬁ" → "fi"), images skipped: the title must match a search for it
    flags = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_LIGATURES & ~pymupdf.TEXT_PRESERVE_IMAGES
    for block_no, block in enumerate(page.get_text("dict", flags=flags).get("blocks", [])):
        for line in block.get("lines", []):
            direction = line.get("dir", (1.0, 0.0))
            if abs(direction[0] - 1.0) > 0.01:  # the rotated arXiv stamp in the margin is not the title
                continue
            if line.get("bbox", (0, 0, 0, 0))[1] > top_limit:  # titles sit in the top third, figures lower
                continue
            text = expand_ligatures("".join(s.get("text", "") for s in line.get("spans", [])).strip())
            if text:
                size = max(s.get("size", 0.0) for s in line.get("spans", []))
                spans.append((round(size, 1), text, block_no))
    if not spans:
        return ""
    biggest = max(s for s, _, _ in spans)
    lines = [t for s, t, _ in spans if s == biggest]
    return re.sub(r"\s+", " ", " ".join(lines[:4])).strip()[:300]
