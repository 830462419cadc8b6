"""The parsed-paper model shared by the PDF and HTML parsers, and its Markdown form.

Both parsers produce a ``ParsedDocument`` (headings, paragraphs, tables, captions, each with
its page). The Markdown written to ``papers/<id>.md`` keeps page markers (``<!-- page N -->``)
and a references marker so that ``read_sections`` can recover sections with page ranges from
the file alone: get_paper_content and chunking then work the same for PDF and HTML papers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

BlockKind = Literal["heading", "para", "table", "caption"]

PAGE_MARK = re.compile(r"^<!-- page (\d+) -->$")
REFERENCES_MARK = "<!-- references -->"
_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
REFERENCES_TITLE = re.compile(
    r"^(?:[0-9]+\.?\s+|[A-Z]\.?\s+)?(references|bibliography|literature cited|references and notes|works cited)\s*$",
    re.IGNORECASE,
)


@dataclass
class Block:
    kind: BlockKind
    text: str
    page: int | None = None  # 1-based; None for HTML
    level: int = 0  # headings only: 1 = title, 2 = section, 3 = subsection, ...


@dataclass
class ParsedDocument:
    blocks: list[Block]
    references: list[Block] = field(default_factory=list)
    page_count: int = 0
    source: str = "pdf"
    title: str = ""

    def headings(self) -> list[str]:
        return [b.text for b in self.blocks + self.references if b.kind == "heading"]

    def to_markdown(self) -> str:
        """Markdown with page markers; the references come last, after their own marker."""
        out: list[str] = []
        page: int | None = None

        def emit(block: Block) -> None:
            nonlocal page
            if block.page is not None and block.page != page:
                page = block.page
                out.append(f"<!-- page {page} -->")
            if block.kind == "heading":
                out.append("#" * max(1, min(6, block.level)) + " " + block.text)
            else:
                out.append(block.text)

        for block in self.blocks:
            emit(block)
        if self.references:
            out.append(REFERENCES_MARK)
            page = None
            for block in self.references:
                emit(block)
        return "\n\n".join(out) + "\n"


@dataclass
class Section:
    """One heading and what follows it up to the next heading."""

    name: str
    level: int
    part: str  # "front" (before the first heading), "body" or "references"
    paragraphs: list[tuple[int | None, str]] = field(default_factory=list)  # (page, text)
    heading_page: int | None = None

    @property
    def pages(self) -> tuple[int | None, int | None]:
        pages = [p for p, _ in self.paragraphs if p is not None]
        if self.heading_page is not None:
            pages.append(self.heading_page)
        return (min(pages), max(pages)) if pages else (None, None)

    def markdown(self) -> str:
        head = "#" * max(1, self.level) + " " + self.name if self.name and self.level else ""
        body = "\n\n".join(text for _, text in self.paragraphs)
        return (head + "\n\n" + body).strip() if head else body.strip()


def read_sections(markdown: str) -> list[Section]:
    """Split stored Markdown back into sections with their pages (page markers are consumed)."""
    sections: list[Section] = [Section(name="", level=0, part="front")]
    page: int | None = None
    part = "body"
    for raw in re.split(r"\n\s*\n", markdown):
        chunk = raw.strip()
        if not chunk:
            continue
        mark = PAGE_MARK.match(chunk)
        if mark:
            page = int(mark.group(1))
            continue
        if chunk == REFERENCES_MARK:
            part = "references"
            page = None
            continue
        heading = _HEADING.match(chunk) if "\n" not in chunk else None
        if heading:
            level = len(heading.group(1))
            name = heading.group(2).strip()
            if level == 1 and len(sections) == 1 and not sections[0].paragraphs and part == "body":
                # the title opens the front matter rather than a section of its own
                sections[0] = Section(name=name, level=1, part="front", heading_page=page)
                continue
            sections.append(Section(name=name, level=level, part=part, heading_page=page))
            continue
        sections[-1].paragraphs.append((page, chunk))
    return [s for s in sections if s.paragraphs or s.name]


def normalise_heading(text: str) -> str:
    """Lower-case words without numbering, for matching headings against outlines and queries."""
    text = re.sub(r"^(?:appendix\s+)?(?:[0-9]+|[A-Z])(?:\.[0-9]+)*\.?\s+", "", text.strip())
    return " ".join(re.findall(r"[0-9a-z]+", text.lower()))
