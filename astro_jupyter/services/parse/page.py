"""The records a parsed page is made of: text pieces, visual lines, blocks, the page.

Kept apart from ``layout.py`` (which builds them) and ``tables.py`` (which rewrites table
blocks) so that each of those imports the records and neither imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence


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
    # the MuPDF lines it merges, each with its exact box, for table cells (only where those boxes
    # were read: an empty tuple, untracked by the garbage collector, everywhere else)
    cells: Sequence[Piece] = ()
    italic: bool = False  # every character italic (AASTeX sets subsection titles so)
    mono: bool = False  # every character in a monospaced font: code, never a heading


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
