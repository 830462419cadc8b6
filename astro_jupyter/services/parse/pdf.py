"""PDF → ``ParsedDocument`` with PyMuPDF: headings from font statistics, reading order, tables.

Headings are found without the PDF outline (the outline is what the benchmark scores
against): the body size is the most common font size by character count; a heading is a
short line that is bold or larger than the body and reads like a title, optionally numbered
("2.1 Method", "A Appendix", "IV. RESULTS"); in the body font only when numbered in capitals
or italics, or a known section name in capitals (the AASTeX look). Numbered headings get
their level from the numbering depth, unnumbered ones the level numbered headings of their
size have. Bold author lines before the abstract stay paragraphs; footnotes follow their
page's text; the references section is moved to its own part.
"""

from __future__ import annotations

import re
from operator import itemgetter
from pathlib import Path
from typing import Any, Callable, Iterator

from ...errors import AstroError
from ..pdf_lock import PYMUPDF_LOCK, locked
from .document import REFERENCES_TITLE, Block, ParsedDocument
from .layout import extract_page, reading_order, remove_running_lines
from .page import Line, PageData, TextBlock
from .text import join_lines, resolve_breaks

__all__ = ["PYMUPDF_LOCK", "ParseError", "assemble", "finish", "iter_pages", "locked", "open_pdf", "parse_pdf"]


class ParseError(AstroError):
    """The document cannot be turned into text; the message says why in user terms."""

    reason = "parse"


_NUMBERED = re.compile(r"^(?P<num>(?:\d{1,2}|[IVX]{2,4}|[A-Z])(?:\.\d{1,2}){0,3})\.?\s+(?P<title>\S.*)$")
# section names journals set in plain capitals (AASTeX: "ABSTRACT", "1. INTRODUCTION", "REFERENCES")
_CAPS_SECTION = re.compile(
    r"^(?:abstract|introduction|observations?|data|methods?|analysis|results|discussion|conclusions?|summary|"
    r"acknowledge?ments?|references|bibliography|appendix)\b",
    re.IGNORECASE,
)
_APPENDIX = re.compile(r"^appendix\b", re.IGNORECASE)
_CAPTION = re.compile(r"^(?:figure|fig\.|table|tab\.)\s*[0-9IVX]+[a-z]?\s*[:.|]", re.IGNORECASE)
_CAPTION_INITIALS = "FfTt"
_SENTENCE_END_CHARS = frozenset('.!?:;)]"”')


def _ends_sentence(text: str) -> bool:
    """The text ends in sentence punctuation (before one final newline, as a regex ``$`` reads it).
    Looks at the end only: a search for ``[.!?]$`` tries every position of a growing paragraph."""
    if text.endswith("\n"):
        text = text[:-1]
    return text[-1:] in _SENTENCE_END_CHARS
# code and page furniture that is bold or large but never a heading
_CODE_MARKS = re.compile(r"[;{}]|#\s*(?:include|define|if|endif)\b|==|!=|->|::|&&|\|\||\+\+|\w\[\w*\]|^\s*(?:def|class|import|return)\s")
_SIGNATURE = re.compile(r"\b[A-Za-z_]\w*\s*\((?:[^()]*[,*&][^()]*|\s*)\)")
_CODE_WORDS = frozenset(
    "int char unsigned void long short float double const struct ret str len bool def elif typedef size_t "
    "uint8_t int32_t int64_t uint32_t uint64_t nullptr null sizeof printf malloc argc argv stdin stdout "
    "fitsfile lambda async await".split()
)
_TOC_LINE = re.compile(r"^(?:(?:\d{1,2}|[A-Z])(?:\.\d{1,2}){0,3}\.?\s+)?\S.*?(?:\s*\.){0,}\s+\d{1,4}$")
_LETTER = re.compile(r"[A-Za-z]")
_CONTENTS = re.compile(r"(?:table of )?contents", re.IGNORECASE)
_CHAPTER = re.compile(r"^(?:chapter|part|appendix)\s+(\d{1,2}|[IVX]{1,4}|[A-Z])$", re.IGNORECASE)
_ASCII_LOWER = re.compile(r"[a-z]")
_NOT_ASCII_LETTER = re.compile(r"[^A-Za-z]")


def looks_like_code(line: Line, text: str) -> bool:
    """Monospaced, a function signature, C/Python punctuation, or mostly type names and keywords
    ("int fits_open_file(fitsfile **fptr, ...)", "ret len unsigned char str int")."""
    if line.mono or _CODE_MARKS.search(text):
        return True
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)
    code = sum(1 for w in words if w.lower() in _CODE_WORDS)
    if _SIGNATURE.search(text) and (code or "_" in text or text.rstrip().endswith(";")):
        return True
    return code >= 2 and code >= 0.4 * len(words)


def open_pdf(path: str | Path) -> Any:
    """Open and validate; raise ``ParseError`` with a clear message for unusable files."""
    import pymupdf

    try:
        doc = pymupdf.open(str(path), filetype="pdf")
    except Exception as exc:  # noqa: BLE001 - pymupdf raises FileDataError/RuntimeError/ValueError
        raise ParseError(f"not a valid PDF: {Path(path).name} could not be opened ({exc})") from exc
    if doc.needs_pass:
        doc.close()
        raise ParseError("the PDF is encrypted (password-protected); it cannot be parsed without the password")
    if doc.page_count == 0:
        doc.close()
        raise ParseError("not a valid PDF: it has no pages")
    return doc


def iter_pages(doc: Any) -> Iterator[PageData]:
    for index in range(doc.page_count):
        try:
            page = doc.load_page(index)
        except Exception as exc:  # noqa: BLE001
            raise ParseError(f"not a valid PDF: page {index + 1} is damaged ({exc})") from exc
        yield extract_page(page, index + 1)


# -- heading classification ------------------------------------------------------------------
def body_size(pages: list[PageData]) -> float:
    sizes: dict[float, int] = {}
    get = sizes.get
    for page in pages:
        for block in page.blocks:
            for line in block.lines:
                sizes[line.size] = get(line.size, 0) + line.chars
    # the first of equal counts wins, as with ``Counter.most_common``
    return max(sizes.items(), key=itemgetter(1))[0] if sizes else 10.0


def _plain_heading(line: Line, text: str) -> bool:
    """Headings set in the body font: numbered in capitals or italics ("1. INTRODUCTION",
    "2.1. Imaging"), or a well-known section name in capitals ("REFERENCES")."""
    if len(text) > 90 or text.endswith("."):
        return False
    # every case needs capitals or italics, and a lower-case letter rules capitals out: the
    # common body line is settled by one search
    if _ASCII_LOWER.search(text):
        if not line.italic:
            return False
        caps = False
    else:
        caps = len(_NOT_ASCII_LETTER.sub("", text)) >= 4
    match = _NUMBERED.match(text)
    if match:
        return caps or (line.italic and match.group("title")[:1].isupper())
    return caps and len(text.split()) <= 4 and bool(_CAPS_SECTION.match(text))


def _looks_like_heading(line: Line, body: float) -> bool:
    text = line.text.strip()
    if line.size < body - 0.6:
        return False
    if not (line.bold or line.size >= body + 1.0) and not _plain_heading(line, text):
        return False
    if len(text) > 120 or len(text.split()) > 16 or len(re.findall(r"[A-Za-z]", text)) < 3:
        return False
    if _CAPTION.match(text) or text[0].islower() or text[-1] in ",;-–":
        return False
    if re.search(r"@|https?://|www\.|[∗†‡§¶✉]|,$", text):
        return False
    if looks_like_code(line, text) or sum(c.isalpha() for c in text) < 0.5 * len(text.replace(" ", "")):
        return False
    if text.endswith(".") and not _NUMBERED.match(text):
        return False  # a bold sentence, not a title
    return True


def _level(text: str, size: float, body: float) -> int:
    match = _NUMBERED.match(text)
    if match:
        depth = match.group("num").count(".") + 1
        return min(6, depth + 1)
    if _APPENDIX.match(text):
        return 2
    return 2 if size >= body * 1.12 else 3


def _numbered_ok(text: str) -> bool:
    """A single capital letter counts as numbering only before a capitalised title ("A Setup")."""
    match = _NUMBERED.match(text)
    if not match:
        return True
    num = match.group("num")
    return not num.isalpha() or match.group("title")[:1].isupper()


# -- assembling ----------------------------------------------------------------------------------
_join = join_lines  # line-end hyphens are marked here and resolved once the document is known


def _paragraphs(lines: list[Line], body: float) -> list[str]:
    """Split a block's lines into paragraphs at indents and vertical gaps."""
    if len(lines) == 1:  # most blocks: one line, one paragraph
        line = lines[0]
        text = line.text
        if line.bold_prefix and text.startswith(line.bold_prefix):
            text = f"**{line.bold_prefix}**" + text[len(line.bold_prefix):]
        return [text] if text else []
    paras: list[str] = []
    current = ""
    prev: Line | None = None
    left = min(ln.x0 for ln in lines)
    indent_at, flush_at = body * 0.8, body * 0.5
    for line in lines:
        text = line.text
        if line.bold_prefix and text.startswith(line.bold_prefix):
            text = f"**{line.bold_prefix}**" + text[len(line.bold_prefix):]
        new_para = False
        if prev is not None:
            gap = line.y0 - prev.y1
            indent = line.x0 - left > indent_at and prev.x0 - left < flush_at
            new_para = gap > max(prev.y1 - prev.y0, 6) * 0.9 or (indent and _ends_sentence(current))
            # a caption starts with F or T: the first letter spares the pattern on other lines
            if line.text[:1] in _CAPTION_INITIALS and _CAPTION.match(line.text):
                new_para = True
        if new_para and current:
            paras.append(current)
            current = ""
        current = _join(current, text) if current else text
        prev = line
    if current:
        paras.append(current)
    return paras


_FRONT_END = re.compile(r"^(?:(?:\d+|I)\.?\s+)?(abstract|introduction|background|summary|contents)\b", re.IGNORECASE)


def _title_block(pages: list[PageData], body: float) -> TextBlock | None:
    """The title: the largest text among the first blocks of page 1 (figure text comes later)."""
    if not pages:
        return None
    first = [b for b in reading_order(pages[0]) if b.table is None][:4]
    best = max(first, key=lambda b: b.lines[0].size, default=None)
    if best is None or best.lines[0].size < body * 1.2:
        return None
    return best


def _title_continuation(pages: list[PageData], title: TextBlock) -> list[TextBlock]:
    """Blocks right after the title set in the same size continue it (a title over two blocks)."""
    order = [b for b in reading_order(pages[0]) if b.table is None]
    size = title.lines[0].size
    out: list[TextBlock] = []
    for block in order[order.index(title) + 1 :]:
        if all(abs(ln.size - size) < 0.6 for ln in block.lines) and block.y0 - title.y1 < size * 3:
            out.append(block)
            continue
        break
    return out


_FOOTNOTE = re.compile(r"^(?:\d{1,2}|[∗*†‡§¶])\s?\S")


def _footnotes_last(blocks: list[TextBlock], page: PageData, body: float) -> list[TextBlock]:
    """Small-print notes at the foot of a page go after the page's text, so that a paragraph
    continued from one column to the next is not interrupted by them."""
    notes = [
        b for b in blocks
        if b.table is None
        and b.y0 > page.height * 0.7
        and all(ln.size <= body * 0.88 for ln in b.lines)
        and _FOOTNOTE.match(b.text)
    ]
    return [b for b in blocks if b not in notes] + notes if notes else blocks


def assemble(pages: list[PageData]) -> ParsedDocument:
    """Pages (already extracted) → headings, paragraphs, tables and captions in reading order."""
    remove_running_lines(pages)
    body = body_size(pages)
    title_block = _title_block(pages, body)
    title_more = _title_continuation(pages, title_block) if title_block is not None else []
    blocks: list[Block] = []
    sizes: dict[int, float] = {}  # id(heading block) → font size, for the level pass
    toc_pages = _contents_pages(pages)
    for page in pages:
        in_toc = page.number in toc_pages

        def heading_line(line: Line) -> bool:
            # a table of contents lists headings with their page numbers; they are not headings there
            return _looks_like_heading(line, body) and not (in_toc and _TOC_LINE.match(line.text.strip()))

        for block in _footnotes_last(reading_order(page), page, body):
            if block.table is not None:
                blocks.append(Block("table", block.table, page.number))
                continue
            lines = list(block.lines)
            if block is title_block:
                size = lines[0].size
                title_lines = [ln for ln in lines if ln.size >= size - 0.5]
                blocks.append(Block("heading", " ".join(ln.text for ln in title_lines), page.number, 1))
                lines = [ln for ln in lines if ln.size < size - 0.5]
            elif title_more and any(block is more for more in title_more):
                blocks[-1].text += " " + " ".join(ln.text for ln in lines)
                continue
            # leading heading lines of the block (a heading may wrap over two lines)
            head: list[Line] = []
            while lines and heading_line(lines[0]) and (not head or abs(lines[0].size - head[0].size) < 0.6):
                head.append(lines.pop(0))
                if len(head) == 2 or (lines and not heading_line(lines[0])):
                    break
            if len(head) == 1 and _CHAPTER.match(head[0].text.strip()) and lines and heading_line(lines[0]):
                head.append(lines.pop(0))  # "Chapter 2" over "Using the Library", in one block
            if head:
                text = " ".join(ln.text for ln in head)
                chapter = _CHAPTER.match(head[0].text.strip()) if len(head) == 2 else None
                if chapter:
                    text = f"{chapter.group(1)} {head[1].text}"
                if _numbered_ok(text) and len(text) <= 150:
                    heading = Block("heading", text, page.number, 0)
                    sizes[id(heading)] = head[0].size
                    blocks.append(heading)
                else:
                    lines = head + lines
            if not lines:
                continue
            for para in _paragraphs(lines, body):
                kind = "caption" if para[:1] in _CAPTION_INITIALS and _CAPTION.match(para) else "para"
                prev = blocks[-1] if blocks else None
                if (
                    kind == "para"
                    and prev is not None
                    and prev.kind == "para"
                    and not _ends_sentence(prev.text)
                    and para[:1].islower()
                ):
                    # a paragraph continued across a column or page break
                    prev.text = _join(prev.text, para)
                    continue
                blocks.append(Block(kind, para, page.number))
    for block, text in zip(blocks, resolve_breaks([b.text for b in blocks])):
        block.text = text
    blocks = _merge_chapter_labels(blocks, sizes)
    _assign_levels(blocks, sizes, body)
    body_blocks, references = split_references(blocks)
    title = next((b.text for b in body_blocks if b.kind == "heading" and b.level == 1), "")
    return ParsedDocument(body_blocks, references, len(pages), "pdf", title)


def _contents_pages(pages: list[PageData]) -> set[int]:
    """Pages of a table of contents: three or more lines that end in a page number, on a page that
    says "Contents" or continues such a page."""
    found: set[int] = set()
    for page in pages:
        lines = [ln.text.strip() for b in page.blocks for ln in b.lines]
        titled = any(len(t) <= 17 and _CONTENTS.fullmatch(t) for t in lines)
        if not titled and page.number - 1 not in found:
            continue  # neither says "Contents" nor continues a contents page: no entries to count
        # only a line that ends in a digit can be an entry: the cheap test first
        entries = sum(1 for t in lines if t[-1:].isdigit() and _TOC_LINE.match(t) and len(_LETTER.findall(t)) >= 3)
        if entries >= 3 and entries >= 0.3 * max(1, len(lines)):
            found.add(page.number)
    return found


def _merge_chapter_labels(blocks: list[Block], sizes: dict[int, float]) -> list[Block]:
    """"Chapter 2" set above its title is one heading: "2 Creating the Library"."""
    out: list[Block] = []
    skip = False
    for i, block in enumerate(blocks):
        if skip:
            skip = False
            continue
        match = _CHAPTER.match(block.text.strip()) if block.kind == "heading" else None
        nxt = blocks[i + 1] if i + 1 < len(blocks) else None
        if match and nxt is not None and nxt.kind == "heading" and id(nxt) in sizes and id(block) in sizes:
            merged = Block("heading", f"{match.group(1)} {nxt.text}", block.page, 0)
            sizes[id(merged)] = max(sizes[id(block)], sizes[id(nxt)])
            out.append(merged)
            skip = True
            continue
        out.append(block)
    return out


def _assign_levels(blocks: list[Block], sizes: dict[int, float], body: float) -> None:
    """Numbered headings: level from depth. Unnumbered: the level numbered ones of that size have."""
    by_size: dict[float, int] = {}
    for block in blocks:
        if id(block) in sizes and _NUMBERED.match(block.text):
            level = _level(block.text, sizes[id(block)], body)
            size = sizes[id(block)]
            by_size[size] = min(level, by_size.get(size, 9))
    largest_numbered = max(by_size, default=0.0)
    front = True
    for block in blocks:
        if id(block) not in sizes:
            continue
        size = sizes[id(block)]
        if _NUMBERED.match(block.text) or _APPENDIX.match(block.text):
            block.level = _level(block.text, size, body)
        elif size in by_size:
            block.level = by_size[size]
        elif by_size:
            block.level = 2 if size > largest_numbered else 3
        else:
            block.level = _level(block.text, size, body)
        if front and block.page == 1:
            if _NUMBERED.match(block.text) or _FRONT_END.match(block.text):
                front = False
            elif block.level > 1:
                block.kind = "para"  # author names and affiliations set in bold, not sections
        else:
            front = False


def split_references(blocks: list[Block]) -> tuple[list[Block], list[Block]]:
    """Move the references section (up to the next heading of its level or higher) to its own part."""
    start = next((i for i, b in enumerate(blocks) if b.kind == "heading" and REFERENCES_TITLE.match(b.text)), None)
    if start is None:
        return blocks, []
    level = blocks[start].level
    end = next((j for j in range(start + 1, len(blocks)) if blocks[j].kind == "heading" and blocks[j].level <= level), len(blocks))
    return blocks[:start] + blocks[end:], blocks[start:end]


def parse_pdf(path: str | Path, on_page: Callable[[int, int], None] | None = None) -> ParsedDocument:
    """Synchronous whole-file parse (benchmarks, scripts); the service runs pages off the loop."""
    doc = open_pdf(path)
    try:
        pages = []
        for page in iter_pages(doc):
            pages.append(page)
            if on_page is not None:
                on_page(page.number, doc.page_count)
    finally:
        doc.close()
    return finish(pages)


def finish(pages: list[PageData]) -> ParsedDocument:
    """Assemble, or raise the image-only error when no page has text."""
    if not any(page.blocks for page in pages):
        if any(page.image_area > 0 for page in pages):
            raise ParseError("no extractable text: the PDF is image-only (scanned); OCR is not available")
        raise ParseError("no extractable text: the PDF contains no text")
    return assemble(pages)
