"""The records a parsed page is made of: text pieces, visual lines, blocks, the page.

Kept apart from ``layout.py`` (which builds them) and ``tables.py`` (which rewrites table
blocks) so that each of those imports the records and neither imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .text import SOFT_HYPHEN, clean_line


@dataclass(slots=True)
class Piece:
    """A PyMuPDF line fragment: kept for table cells (their x-extent matters)."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str


@dataclass(slots=True)
class Line:
    """One visual line (PyMuPDF lines of a block on the same baseline merged)."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    size: float
    bold: bool  # every character bold
    bold_prefix: str = ""  # a bold run-in heading at the start of an otherwise plain line
    chars: int = 0
    # PyMuPDF's line dicts, for table cells (``dict`` path only; an empty tuple, untracked by the
    # garbage collector, everywhere else)
    raw: Sequence[dict[str, Any]] = ()
    italic: bool = False  # every character italic (AASTeX sets subsection titles so)
    mono: bool = False  # every character in a monospaced font: code, never a heading

    @property
    def pieces(self) -> list[Piece]:
        """The PyMuPDF line fragments with their boxes; built only on table pages."""
        out = []
        for raw in self.raw:
            text = clean_line("".join(span["text"] for span in raw["spans"]).strip()).replace(SOFT_HYPHEN, "")
            if text:
                x0, y0, x1, y1 = raw["bbox"]
                out.append(Piece(x0, y0, x1, y1, text))
        return out


@dataclass(slots=True)
class TextBlock:
    page: int
    x0: float
    y0: float
    x1: float
    y1: float
    lines: list[Line]
    table: str | None = None  # Markdown, when this block stands for a detected table

    @property
    def text(self) -> str:
        return " ".join(line.text for line in self.lines)


@dataclass
class PageData:
    number: int  # 1-based
    width: float
    height: float
    blocks: list[TextBlock]
    rules: list[tuple[float, float, float]] = field(default_factory=list)  # horizontal rules (x0, x1, y)
    image_area: float = 0.0
    verticals: list[tuple[float, float, float]] = field(default_factory=list)  # vertical rules (x, y0, y1)
