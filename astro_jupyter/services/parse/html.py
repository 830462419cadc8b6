"""HTML papers (ar5iv/LaTeXML, publisher pages) → ``ParsedDocument`` with the stdlib parser.

ar5iv marks structure well: ``<section>``, ``<h2 class="ltx_title">``, ``<p>``, ``<table>``,
``<figcaption>``, ``<math alttext="...">``. Heading levels follow the tag; math becomes
``$alttext$``; tables become pipe tables (LaTeXML equation tables become math paragraphs).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from .document import Block, ParsedDocument
from .pdf import split_references
from .tables import rows_to_markdown

_SKIP = {"script", "style", "nav", "header", "footer", "noscript", "button", "svg"}
_BLOCK_TEXT = {"p", "figcaption", "li", "dd", "dt", "blockquote", "pre", "caption"}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self.title = ""
        self._skip = 0
        self._math = 0
        self._in_title = False
        self._text: list[str] = []
        self._kind: str | None = None
        self._level = 0
        self._table_depth = 0
        self._rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._equation_table = False

    # -- text collection ---------------------------------------------------------------
    def _flush(self) -> None:
        text = " ".join("".join(self._text).split())
        self._text = []
        if not text or self._kind is None:
            return
        if self._kind == "heading":
            text = re.sub(r"^(\d+(?:\.\d+)*|[A-Z](?:\.\d+)*)\s*(?=[A-Z])", r"\1 ", text)
            self.blocks.append(Block("heading", text, None, self._level))
        elif self._kind == "li":
            self.blocks.append(Block("para", text))
        else:
            self.blocks.append(Block("caption" if self._kind == "figcaption" else "para", text))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if tag in _SKIP:
            self._skip += 1
            return
        if self._skip:
            return
        if tag == "title":
            self._in_title = True
            return
        if tag == "math":
            alt = attr.get("alttext") or ""
            if alt:
                self._write(f" ${alt}$ ")
            self._math += 1
            return
        if tag == "br":
            self._write(" ")
            return
        if tag == "table":
            self._table_depth += 1
            if self._table_depth == 1:
                self._flush()
                self._kind = None
                self._rows = []
                self._equation_table = "ltx_equation" in (attr.get("class") or "")
            return
        if self._table_depth:
            if tag == "tr":
                self._rows.append([])
            elif tag in ("td", "th"):
                self._cell = []
            return
        if tag in _HEADINGS:
            self._flush()
            self._kind, self._level = "heading", _HEADINGS[tag]
            if "ltx_title_abstract" in (attr.get("class") or ""):
                self._level = 2  # LaTeXML sets the abstract's title as <h6>
        elif tag in _BLOCK_TEXT:
            self._flush()
            self._kind = tag

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skip = max(0, self._skip - 1)
            return
        if self._skip:
            return
        if tag == "title":
            self._in_title = False
            return
        if tag == "math":
            self._math = max(0, self._math - 1)
            return
        if self._table_depth:
            if tag in ("td", "th") and self._cell is not None and self._rows:
                self._rows[-1].append(" ".join("".join(self._cell).split()))
                self._cell = None
            elif tag == "table":
                self._table_depth -= 1
                if self._table_depth == 0:
                    self._emit_table()
            return
        if tag in _HEADINGS or tag in _BLOCK_TEXT:
            self._flush()
            self._kind = None

    def _emit_table(self) -> None:
        rows = [r for r in self._rows if any(c for c in r)]
        if not rows:
            return
        if self._equation_table or max(len(r) for r in rows) < 2 or len(rows) < 2:
            text = " ".join(c for r in rows for c in r if c)
            self.blocks.append(Block("para", text))
        else:
            self.blocks.append(Block("table", rows_to_markdown(rows)))

    def _write(self, data: str) -> None:
        if self._table_depth and self._cell is not None:
            self._cell.append(data)
        elif self._kind is not None:
            self._text.append(data)

    def handle_data(self, data: str) -> None:
        if self._skip or self._math:
            return
        if self._in_title:
            self.title += data
            return
        self._write(data)


def parse_html(html: str) -> ParsedDocument:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    builder._flush()
    blocks = builder.blocks
    if not any(b.kind == "heading" and b.level == 1 for b in blocks) and builder.title.strip():
        blocks.insert(0, Block("heading", " ".join(builder.title.split()), None, 1))
    body, references = split_references(blocks)
    title = next((b.text for b in body if b.kind == "heading" and b.level == 1), "")
    return ParsedDocument(body, references, 0, "html", title)
