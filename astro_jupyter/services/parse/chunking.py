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


def chunk_sections(sections: list[Section], *, target: int = 1200, max_chars: int = 1500) -> list[Chunk]:
    out: list[Chunk] = []
    for section in sections:
        if not section.paragraphs:
            continue
        out.extend(chunk_section(section, start_seq=len(out), target=target, max_chars=max_chars))
    return out
