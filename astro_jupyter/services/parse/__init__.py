"""Parsing a library paper: PDF or HTML → Markdown file + section-aware chunks + embeddings.

``ParseService.parse`` is what the ``parse_paper`` tool calls; ``content`` serves
``get_paper_content``. Pages are extracted one at a time off the event loop so the
caller gets a progress report per page and the server stays responsive.
"""

from __future__ import annotations

import asyncio
import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ... import background_cpu
from ...errors import ToolInputError
from ..pdf_lock import locked
from .chunking import chunk_sections
from .document import ParsedDocument, Section, normalise_heading, read_sections
from .pdf import ParseError, finish, iter_pages, open_pdf

if TYPE_CHECKING:
    from ...config import AstroConfig
    from ...store.chunks import ChunkRepository
    from ..rag import RagService

__all__ = ["ParseError", "ParsedPaper", "ParseResult", "ParseService", "detect_format", "digest_document", "parse_file"]

Progress = Callable[..., Awaitable[None]]


@dataclass
class ParseResult:
    paper_id: str
    markdown_path: Path
    pages: int
    sections: list[str]
    chunks: int
    references_chunks: int
    embedded: int
    source: str
    title: str
    embed_error: str = ""


@dataclass
class ParsedPaper:
    """A parsed document as the library stores it: Markdown, its sections and chunks (plain data, so a
    bulk-ingest worker process can make it and hand it back)."""

    markdown: str
    sections: list[Section]
    chunks: list[Any]  # chunking.Chunk
    page_count: int
    source: str
    title: str


def digest_document(doc: ParsedDocument) -> ParsedPaper:
    """Markdown, sections and chunks of a parsed document: one function for every parse path, so a
    paper parsed by ``parse_paper``, ``library add`` or ``library ingest`` gets the same chunks."""
    markdown = doc.to_markdown()
    sections = read_sections(markdown)
    return ParsedPaper(markdown, sections, chunk_sections(sections), doc.page_count, doc.source, doc.title)


def parse_file(path: Path) -> ParsedDocument:
    """``ParseService.parse_document`` in one synchronous call (no progress), for worker processes."""
    if detect_format(path) == "html":
        from .html import parse_html

        return parse_html(path.read_text("utf-8", "replace"))
    pdf = locked(open_pdf, path)
    try:
        pages = locked(lambda: list(iter_pages(pdf)))
    finally:
        locked(pdf.close)
    return finish(pages)


def detect_format(path: Path) -> str:
    """``pdf`` or ``html`` by content (downloads may carry the wrong extension)."""
    with path.open("rb") as fh:
        head = fh.read(1024)
    if head.lstrip().startswith(b"%PDF") or b"%PDF-" in head[:1024]:
        return "pdf"
    lowered = head.lower()
    if b"<html" in lowered or b"<!doctype html" in lowered or b"<section" in lowered or b"<body" in lowered:
        return "html"
    return "pdf"  # let the PDF opener say "not a valid PDF"


def markdown_filename(paper_id: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", paper_id).strip("._") or "paper"
    return f"{stem[:150]}.md"


class ParseService:
    def __init__(self, config: "AstroConfig", library: Any, chunks: "ChunkRepository", rag: "RagService") -> None:
        self.config = config
        self.library = library
        self.chunks = chunks
        self.rag = rag

    async def source_path(self, record: Any) -> Path:
        candidates = [record.pdf_path, (record.metadata or {}).get("html_path")]
        for candidate in candidates:
            if candidate and Path(candidate).is_file():
                return Path(candidate)
        raise ToolInputError(
            f"paper {record.id!r} has no downloaded PDF or HTML yet; download it first (download_paper)"
        )

    async def parse_document(self, path: Path, progress: Progress | None = None) -> ParsedDocument:
        if detect_format(path) == "html":
            from .html import parse_html

            text = await asyncio.to_thread(path.read_text, "utf-8", "replace")
            doc = await background_cpu.run(parse_html, text)
            if progress is not None:
                await progress(done=1, total=1, message="parsed HTML")
            return doc
        pdf = await background_cpu.run(locked, open_pdf, path)
        try:
            total = pdf.page_count
            pages = []
            iterator = iter_pages(pdf)
            for number in range(1, total + 1):
                page = await background_cpu.run(locked, next, iterator)
                pages.append(page)
                if progress is not None:
                    await progress(done=number, total=total, message=f"page {number}/{total}")
        finally:
            await asyncio.to_thread(locked, pdf.close)
        return await background_cpu.run(finish, pages)

    async def parse(self, identifier: str, progress: Progress | None = None) -> ParseResult:
        """Parse under the paper's parse claim: in a shared library, a second user's parse of the same
        paper waits for the first and then returns its result instead of parsing again."""
        record = await self.library.get(identifier)
        async with self.library.papers.parse_claim(record.id):
            current = await self.library.get(record.id)
            if record.state != "parsed" and current.state == "parsed" and current.markdown_path \
                    and Path(current.markdown_path).is_file():
                return await self._parsed_already(current)
            return await self._parse(current, progress)

    async def _parsed_already(self, record: Any) -> ParseResult:
        """What the parse that finished while this one waited produced."""
        text = await asyncio.to_thread(Path(record.markdown_path).read_text, "utf-8")
        sections = read_sections(text)
        rows = await self.chunks.for_paper(record.id)
        source = record.pdf_path or (record.metadata or {}).get("html_path")
        return ParseResult(
            record.id, Path(record.markdown_path), int((record.metadata or {}).get("pages") or 0),
            [s.name for s in sections if s.name and s.part != "front"],
            len([c for c in rows if c.part != "references"]), len([c for c in rows if c.part == "references"]),
            0, detect_format(Path(source)) if source and Path(source).is_file() else "", record.title,
        )

    async def _parse(self, record: Any, progress: Progress | None) -> ParseResult:
        path = await self.source_path(record)
        doc = await self.parse_document(path, progress)
        return await self.store_parsed(record, digest_document(doc), progress=progress)

    async def store_parsed(self, record: Any, paper: "ParsedPaper", vectors: Any = None,
                           progress: Progress | None = None) -> ParseResult:
        """Write what parsing made: the Markdown (atomically), the chunks, their vectors (``vectors``:
        the non-reference chunks' embeddings, in order, made elsewhere, e.g. by a bulk-ingest worker;
        else embedded here), then the paper's 'parsed' state last, so a paper is 'parsed' only once
        all of it is written."""
        markdown, sections, chunks = paper.markdown, paper.sections, paper.chunks
        self.config.papers_dir.mkdir(parents=True, exist_ok=True)
        target = self.config.papers_dir / markdown_filename(record.id)
        tmp = target.with_name(f".{target.name}.tmp")
        await asyncio.to_thread(tmp.write_text, markdown, "utf-8")
        tmp.replace(target)
        old_ids = await self.chunks.removed_ids(record.id)
        self.rag.forget(old_ids)
        await self.chunks.replace(record.id, chunks)
        embedded, embed_error = 0, ""
        try:
            rows = await self.chunks.for_paper(record.id)

            async def embed_progress(done: int, total: int) -> None:
                if progress is not None:
                    await progress(done=done, total=total, message=f"embedded {done}/{total} chunks")

            if vectors is not None:
                embedded = await self.rag.store_vectors(rows, vectors)
            else:
                embedded = await self.rag.embed_chunks(rows, progress=embed_progress)
        except Exception as exc:  # noqa: BLE001 - chunks are stored; rag_search embeds them later
            embed_error = str(exc)
            self.rag.mark_unsynced()
        fields: dict[str, Any] = {}
        if paper.title and not record.title:
            fields["title"] = paper.title
        if paper.page_count:
            # save_note checks page numbers against this; downloads may not have recorded it
            fields["metadata"] = {**(record.metadata or {}), "pages": paper.page_count}
        await self.library.set_parsed(record.id, target, **fields)
        return ParseResult(
            record.id,
            target,
            paper.page_count,
            [s.name for s in sections if s.name and s.part != "front"],
            len([c for c in chunks if c.part != "references"]),
            len([c for c in chunks if c.part == "references"]),
            embedded,
            paper.source,
            paper.title or record.title,
            embed_error,
        )

    async def remove(self, identifier: str) -> tuple[Any, int]:
        """Undo what adding and parsing made: the paper's passages and their vectors (so no search
        returns them), its row, and the PDF copy and Markdown in ``papers/``. Returns (record, passages)."""
        record = await self.library.get(identifier)
        await self.library.check_removable(record)  # before anything goes: a refused removal removes nothing
        chunk_ids = await self.chunks.removed_ids(record.id)
        self.rag.forget(chunk_ids)
        await self.chunks.replace(record.id, [])
        await self.library.remove(record.id)
        return record, len(chunk_ids)

    # -- reading ------------------------------------------------------------------------------
    async def sections(self, identifier: str) -> tuple[Any, list[Section]]:
        record = await self.library.get(identifier)
        path = Path(record.markdown_path) if record.markdown_path else None
        if path is None or not path.is_file():
            raise ToolInputError(f"paper {record.id!r} has not been parsed yet; run parse_paper first")
        text = await asyncio.to_thread(path.read_text, "utf-8")
        return record, read_sections(text)

    @staticmethod
    def find_section(sections: list[Section], name: str) -> list[Section]:
        """Case-insensitive: exact name, then numbering-free name, then prefix, then fuzzy. Sub-sections come along."""
        wanted = name.strip().lower()
        norm = normalise_heading(name)
        named = [(i, s) for i, s in enumerate(sections) if s.name]
        match = next((i for i, s in named if s.name.lower() == wanted), None)
        if match is None and re.fullmatch(r"(?:\d+|[a-z])(?:\.\d+)*\.?", wanted):
            number = wanted.rstrip(".")
            match = next((i for i, s in named if s.name.lower().split(" ", 1)[0].rstrip(".") == number), None)
        if match is None:
            match = next((i for i, s in named if normalise_heading(s.name) == norm and norm), None)
        if match is None:
            match = next((i for i, s in named if norm and normalise_heading(s.name).startswith(norm)), None)
        if match is None:
            match = next((i for i, s in named if norm and norm in normalise_heading(s.name)), None)
        if match is None and norm:
            names = {normalise_heading(s.name): i for i, s in named}
            close = difflib.get_close_matches(norm, list(names), n=1, cutoff=0.75)
            match = names[close[0]] if close else None
        if match is None:
            return []
        head = sections[match]
        out = [head]
        for s in sections[match + 1 :]:
            if s.level <= head.level or s.part != head.part:
                break
            out.append(s)
        return out

    @staticmethod
    def page_text(sections: list[Section], first: int, last: int) -> str:
        parts: list[str] = []
        for s in sections:
            paras = [t for p, t in s.paragraphs if p is not None and first <= p <= last]
            head_in = s.heading_page is not None and first <= s.heading_page <= last
            if head_in and s.name:
                parts.append("#" * max(1, s.level) + " " + s.name)
            elif paras and s.name:
                parts.append(f"(continuing {s.name})")
            parts.extend(paras)
        return "\n\n".join(parts)
