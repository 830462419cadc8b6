"""Section-aware chunks for retrieval: ~1000-1500 characters, never across a section boundary.

Each chunk carries its section name and page range so that a RAG answer can cite
"[n] paper, section, pages". Consecutive chunks of a section overlap by one sentence
so that a statement cut at a boundary is still found whole in one of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .document import Section

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[*])")
OVERLAP_MAX = 300


@dataclass
class Chunk:
    seq: int
    section: str
    part: str  # "body" | "references" | "front"
    page_start: int | None
    page_end: int | None
    text: str


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text) if s.strip()]


def _pieces(text: str, max_chars: int) -> list[str]:
    """A paragraph longer than a chunk, cut at sentences (tables at rows; words as a last resort)."""
    if len(text) <= max_chars:
        return [text]
    units = text.split("\n") if text.startswith("|") else sentences(text)
    out: list[str] = []
    for unit in units:
        while len(unit) > max_chars:
            cut = unit.rfind(" ", 0, max_chars)
            cut = cut if cut > max_chars // 2 else max_chars
            out.append(unit[:cut].strip())
            unit = unit[cut:].strip()
        if unit:
            out.append(unit)
    return out


def chunk_section(
    section: Section, *, start_seq: int = 0, target: int = 1200, max_chars: int = 1500
) -> list[Chunk]:
    name = section.name or ("Front matter" if section.part == "front" else "")
    units: list[tuple[int | None, str, bool]] = []  # (page, text, starts a paragraph)
    for page, para in section.paragraphs:
        for i, piece in enumerate(_pieces(para, max_chars)):
            units.append((page, piece, i == 0))
    chunks: list[Chunk] = []
    buf: list[tuple[int | None, str, bool]] = []

    def size(items: list[tuple[int | None, str, bool]]) -> int:
        return sum(len(t) + 2 for _, t, _ in items)

    def flush() -> None:
        if not buf:
            return
        pages = [p for p, _, _ in buf if p is not None]
        text = ""
        for _, piece, starts in buf:
            text = piece if not text else text + ("\n\n" if starts else " ") + piece
        chunks.append(
            Chunk(start_seq + len(chunks), name, section.part, min(pages) if pages else None, max(pages) if pages else None, text)
        )

    for unit in units:
        if buf and size(buf) + len(unit[1]) > max_chars or (buf and size(buf) >= target):
            flush()
            last = buf[-1]
            tail = sentences(last[1])[-1] if not last[1].startswith("|") else ""
            buf = [(last[0], tail, True)] if tail and len(tail) <= OVERLAP_MAX and len(tail) + len(unit[1]) <= max_chars else []
        buf.append(unit)
    flush()
    return chunks


PATH_SEP = " › "
_CONTENTS = re.compile(r"^(?:table of )?contents$", re.IGNORECASE)


def section_paths(sections: list[Section]) -> list[str]:
    """Each section's headings from the top ("4 Methodology › 4.2 Crawler"), by heading level."""
    stack: list[tuple[int, str]] = []
    out: list[str] = []
    part = ""
    for section in sections:
        if section.part != part:
            stack, part = [], section.part
        if section.part == "front" or not section.name:
            out.append(section.name)
            continue
        while stack and stack[-1][0] >= section.level:
            stack.pop()
        stack.append((section.level, section.name))
        out.append(PATH_SEP.join(name for _, name in stack))
    return out


def chunk_sections(sections: list[Section], *, target: int = 1200, max_chars: int = 1500) -> list[Chunk]:
    """Chunks of each section in turn (never across a boundary); a chunk's section is its path,
    so full-text and vector search see the headings above the text too."""
    out: list[Chunk] = []
    for section, path in zip(sections, section_paths(sections)):
        if not section.paragraphs or _CONTENTS.match(section.name):
            continue  # a table of contents repeats the headings and answers nothing
        for chunk in chunk_section(section, start_seq=len(out), target=target, max_chars=max_chars):
            if path and section.part != "front":
                chunk.section = path
            out.append(chunk)
    return out
