"""Page layout from PyMuPDF's ``dict`` output: lines, blocks, reading order, running headers.

Why our own layout pass: pymupdf4llm's fast mode finds no headings on real papers and its
layout model runs at a few pages per second. Font statistics plus block geometry give
headings and two-column order at the speed of ``get_text("dict")``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from .page import Line, PageData, TextBlock
from .tables import apply_tables
from .text import clean_line

_TABLE_CAPTION = re.compile(r"^(?:table|tab\.)\s*[0-9IVX]+[a-z]?\s*[:.|]", re.IGNORECASE)
_TWO_LETTERS = re.compile(r"[A-Za-z]{2}")
_BOLD_FONT = re.compile(r"bold|black|heavy|semibold|demi|medi\b|-medi|\.b$|cmbx", re.IGNORECASE)
_MONO_FONT = re.compile(r"mono|courier|cmtt|typewriter|consol|menlo|inconsolata|lmtt|sfTT|nimbusmon|code", re.IGNORECASE)


_style_cache: dict[tuple[int, str], int] = {}


def _style(span: dict[str, Any]) -> int:
    """Bit 1: bold, bit 2: italic, bit 4: monospaced — from the span flags or the font name, cached per font."""
    key = (span["flags"] & 18, span["font"])
    style = _style_cache.get(key)
    if style is None:
        font = key[1]
        bold = bool(key[0] & 16) or bool(_BOLD_FONT.search(font))
        italic = bool(key[0] & 2) or "Ital" in font or "Obli" in font
        mono = bool(span["flags"] & 8) or bool(_MONO_FONT.search(font))
        style = _style_cache[key] = int(bold) | (2 if italic else 0) | (4 if mono else 0)
    return style


def _merge_same_baseline(raw_lines: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Group a block's PyMuPDF lines that sit on one baseline ("1" + "Introduction")."""
    groups: list[list[dict[str, Any]]] = []
    for line in raw_lines:
        if groups:
            last = groups[-1][-1]
            if abs(last["bbox"][3] - line["bbox"][3]) < 2.0 and line["bbox"][0] >= last["bbox"][0]:
                groups[-1].append(line)
                continue
        groups.append([line])
    return groups


def _make_line(group: list[dict[str, Any]]) -> Line | None:
    """Merge one baseline's PyMuPDF lines: text, dominant size, boldness, bold run-in prefix.

    This runs for every line of every page (the largest Python cost of a parse), so it keeps
    per-span work to dict lookups and counts, and takes a short path for the common
    one-line-one-span case.
    """
    if len(group) == 1:
        raw = group[0]
        spans = raw["spans"]
        if len(spans) == 1:
            span = spans[0]
            text = span["text"]
            if not text or text.isspace():
                return None
            style = _style_cache.get((span["flags"] & 18, span["font"]))
            if style is None:
                style = _style(span)
            x0, y0, x1, y1 = raw["bbox"]
            return Line(
                x0, y0, x1, y1, clean_line(" ".join(text.split())), round(span["size"] * 2) / 2,
                bool(style & 1), "", len(text) - text.count(" "), [raw], bool(style & 2), bool(style & 4),
            )
    texts: list[str] = []
    sizes: dict[float, int] = {}
    bold_chars = 0
    italic_chars = 0
    mono_chars = 0
    chars = 0
    prefix_open = True
    prefix: list[str] = []
    kept: list[dict[str, Any]] = []
    style_cache = _style_cache
    for raw in group:
        spans = raw["spans"]
        piece_text = spans[0]["text"] if len(spans) == 1 else "".join([span["text"] for span in spans])
        if not piece_text or piece_text.isspace():
            continue
        kept.append(raw)
        texts.append(piece_text)
        for span in spans:
            text = span["text"]
            n = len(text) - text.count(" ")
            if not n:
                continue
            chars += n
            size = round(span["size"] * 2) / 2
            sizes[size] = sizes.get(size, 0) + n
            style = style_cache.get((span["flags"] & 18, span["font"]))
            if style is None:
                style = _style(span)
            if style & 2:
                italic_chars += n
            if style & 4:
                mono_chars += n
            if style & 1:
                bold_chars += n
                if prefix_open:
                    prefix.append(text)
            else:
                prefix_open = False
    if not kept:
        return None
    text = clean_line(" ".join((texts[0] if len(texts) == 1 else " ".join(texts)).split()))
    size = max(sizes, key=sizes.__getitem__) if len(sizes) > 1 else next(iter(sizes), 0.0)
    all_bold = chars > 0 and bold_chars == chars
    bold_prefix = ""
    if prefix and not all_bold:
        bold_prefix = " ".join("".join(prefix).split())
        if len(bold_prefix) < 3 or not _TWO_LETTERS.search(bold_prefix):
            bold_prefix = ""
    italic = chars > 0 and italic_chars == chars
    if len(kept) == 1:
        x0, y0, x1, y1 = kept[0]["bbox"]
    else:
        boxes = [r["bbox"] for r in kept]
        x0, y0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
        x1, y1 = max(b[2] for b in boxes), max(b[3] for b in boxes)
    return Line(x0, y0, x1, y1, text, size, all_bold, bold_prefix, chars, kept, italic, chars > 0 and mono_chars == chars)


def extract_page(page: Any, number: int) -> PageData:
    """One page's text blocks (horizontal text only) and its horizontal rules."""
    import pymupdf

    # no images (not used), ligatures expanded ("ﬁ" → "fi": words stay searchable), clipped to the page
    flags = (pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES & ~pymupdf.TEXT_PRESERVE_LIGATURES) | pymupdf.TEXT_MEDIABOX_CLIP
    data = page.get_text("dict", flags=flags)
    blocks: list[TextBlock] = []
    for raw_block in data["blocks"]:
        if raw_block.get("type") != 0:
            continue
        raw_lines = raw_block["lines"]
        horizontal = [ln for ln in raw_lines if abs(ln["dir"][1]) < 0.05 and ln["dir"][0] > 0]
        lines = [ln for ln in (_make_line(g) for g in _merge_same_baseline(horizontal)) if ln is not None]
        if not lines:
            continue
        if len(lines) == len(raw_lines):  # nothing dropped: PyMuPDF's block box is the box
            x0, y0, x1, y1 = raw_block["bbox"]
        else:
            x0, y0 = min(ln.x0 for ln in lines), min(ln.y0 for ln in lines)
            x1, y1 = max(ln.x1 for ln in lines), max(ln.y1 for ln in lines)
        blocks.append(TextBlock(number, x0, y0, x1, y1, lines))
    image_area = 0.0
    if not blocks:
        # only needed to tell an image-only (scanned) PDF from an empty one
        image_area = sum(abs(info["bbox"][2] - info["bbox"][0]) * abs(info["bbox"][3] - info["bbox"][1]) for info in page.get_image_info())
    rules: list[tuple[float, float, float]] = []
    verticals: list[tuple[float, float, float]] = []
    if any(_TABLE_CAPTION.match(ln.text) for b in blocks for ln in b.lines[:2]):
        # drawings are only needed for tables; a page without a table caption skips them
        rules, verticals = _rules(page)
    data = PageData(number, float(page.rect.width), float(page.rect.height), blocks, rules, image_area, verticals)
    if rules:
        apply_tables(page, data)
    # PyMuPDF's dicts were needed for table cells only; dropping them here keeps the parse's
    # live objects (what every full garbage-collector pass walks) to our own small records
    for block in data.blocks:
        for line in block.lines:
            line.raw = []
    return data


def _rules(page: Any) -> tuple[list[tuple[float, float, float]], list[tuple[float, float, float]]]:
    """Horizontal and vertical strokes (table rules); ``get_cdrawings`` is the cheap call."""
    rules: list[tuple[float, float, float]] = []
    verticals: list[tuple[float, float, float]] = []
    for path in page.get_cdrawings():
        for item in path.get("items", ()):
            kind = item[0]
            if kind == "l":
                (ax, ay), (bx, by) = item[1], item[2]
                if abs(ay - by) < 1.0 and abs(ax - bx) > 25:
                    rules.append((min(ax, bx), max(ax, bx), (ay + by) / 2))
                elif abs(ax - bx) < 1.0 and abs(ay - by) > 5:
                    verticals.append(((ax + bx) / 2, min(ay, by), max(ay, by)))
            elif kind == "re":
                x0, y0, x1, y1 = item[1]
                if abs(y1 - y0) < 2.0 and abs(x1 - x0) > 25:
                    rules.append((min(x0, x1), max(x0, x1), (y0 + y1) / 2))
                elif abs(x1 - x0) < 2.0 and abs(y1 - y0) > 5:
                    verticals.append(((x0 + x1) / 2, min(y0, y1), max(y0, y1)))
                elif abs(x1 - x0) > 25 and abs(y1 - y0) > 5 and path.get("type") in ("s", "fs"):
                    # a stroked rectangle: its top and bottom edges are rules, its sides verticals
                    rules.extend([(min(x0, x1), max(x0, x1), min(y0, y1)), (min(x0, x1), max(x0, x1), max(y0, y1))])
                    verticals.extend([(min(x0, x1), min(y0, y1), max(y0, y1)), (max(x0, x1), min(y0, y1), max(y0, y1))])
    return rules, verticals


# -- running headers and footers ------------------------------------------------------------
_PAGE_NUMBER = re.compile(r"^(?:page\s*)?\d{1,4}(?:\s*(?:/|of)\s*\d{1,4})?$", re.IGNORECASE)


def _margin_key(block: TextBlock, height: float) -> str | None:
    if block.y1 < height * 0.09 or block.y0 > height * 0.91:
        text = re.sub(r"\d+", "#", block.text.lower()).strip()
        return f"{round(block.y0 / 6)}:{text}"
    return None


_FOLIO = re.compile(r"^(\d{1,4})\s+\S.*|.*\S\s+(\d{1,4})$")


def _folio_offset(block: TextBlock, page: PageData) -> int | None:
    """A one-line block at the very top or bottom of a page that starts or ends with a number:
    a running head with its page number ("58 CHAPTER 5. ROUTINES", "5.2. FILE ACCESS 33").
    Returns printed-minus-physical page number, which is the same on every page of the book."""
    if len(block.lines) != 1 or not (block.y0 < page.height * 0.16 or block.y1 > page.height * 0.84):
        return None
    match = _FOLIO.match(block.text.strip())
    if match is None:
        return None
    return int(match.group(1) or match.group(2)) - page.number


def _edge_blocks(page: PageData) -> list[TextBlock]:
    if not page.blocks:
        return []
    top = min(page.blocks, key=lambda b: b.y0)
    bottom = max(page.blocks, key=lambda b: b.y1)
    return [top] if top is bottom else [top, bottom]


def remove_running_lines(pages: list[PageData]) -> None:
    """Drop page numbers, lines repeated at the same place on many pages, and running heads
    whose text changes with the section but whose page number keeps step with the page."""
    counts: Counter[str] = Counter()
    offsets: Counter[int] = Counter()
    for page in pages:
        for key in {k for k in (_margin_key(b, page.height) for b in page.blocks) if k}:
            counts[key] += 1
        for offset in {o for o in (_folio_offset(b, page) for b in _edge_blocks(page)) if o is not None}:
            offsets[offset] += 1
    threshold = max(2, int(len(pages) * 0.3))
    folio = {o for o, n in offsets.items() if n >= max(3, int(len(pages) * 0.2))}
    for page in pages:
        kept = []
        edges = _edge_blocks(page) if folio else []
        for block in page.blocks:
            key = _margin_key(block, page.height)
            if key is not None and (counts[key] >= threshold or _PAGE_NUMBER.match(block.text.strip())):
                continue
            if any(block is e for e in edges) and _folio_offset(block, page) in folio:
                continue
            kept.append(block)
        page.blocks = kept


# -- reading order -----------------------------------------------------------------------------
def reading_order(page: PageData) -> list[TextBlock]:
    """Single column: top to bottom. Two columns: per band between full-width blocks, left then right."""
    mid = page.width / 2
    tol = page.width * 0.02

    def column(b: TextBlock) -> str:
        if b.x1 <= mid + tol:
            return "L"
        if b.x0 >= mid - tol:
            return "R"
        return "F"

    cols = [column(b) for b in page.blocks]
    left = sum(len(b.text) for b, c in zip(page.blocks, cols) if c == "L")
    right = sum(len(b.text) for b, c in zip(page.blocks, cols) if c == "R")
    blocks = sorted(page.blocks, key=lambda b: (round(b.y0, 1), b.x0))
    if min(left, right) < 200:
        return blocks
    ordered: list[TextBlock] = []
    band_l: list[TextBlock] = []
    band_r: list[TextBlock] = []

    def flush() -> None:
        ordered.extend(sorted(band_l, key=lambda b: b.y0))
        ordered.extend(sorted(band_r, key=lambda b: b.y0))
        band_l.clear()
        band_r.clear()

    for block in blocks:
        c = column(block)
        if c == "F":
            flush()
            ordered.append(block)
        elif c == "L":
            band_l.append(block)
        else:
            band_r.append(block)
    flush()
    return ordered
