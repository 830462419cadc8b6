"""Page layout from a MuPDF text page: lines, blocks, reading order, running headers.

Why our own layout pass: pymupdf4llm's fast mode finds no headings on real papers and its
layout model runs at a few pages per second. Font statistics plus block geometry give
headings and two-column order faster than ``get_text("dict")`` alone (``extract_page`` says
how: the page's HTML, its block boxes, and where needed its lines' boxes from its XML).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .page import Line, PageData, Piece, TextBlock
from .tables import apply_tables, table_regions
from .text import SOFT_HYPHEN, clean_line

_TABLE_CAPTION = re.compile(r"^(?:table|tab\.)\s*[0-9IVX]+[a-z]?\s*[:.|]", re.IGNORECASE)
_TWO_LETTERS = re.compile(r"[A-Za-z]{2}")
_BOLD_FONT = re.compile(r"bold|black|heavy|semibold|demi|medi\b|-medi|\.b$|cmbx", re.IGNORECASE)
_MONO_FONT = re.compile(r"mono|courier|cmtt|typewriter|consol|menlo|inconsolata|lmtt|sfTT|nimbusmon|code", re.IGNORECASE)


_style_cache: dict[tuple[int, str], int] = {}


def _font_style(flags: int, font: str) -> int:
    """Bit 1: bold, bit 2: italic, bit 4: monospaced — from MuPDF's font flags (16 bold, 2 italic,
    8 monospaced) or the font name, cached per font."""
    key = (flags, font)
    style = _style_cache.get(key)
    if style is None:
        bold = bool(flags & 16) or bool(_BOLD_FONT.search(font))
        italic = bool(flags & 2) or "Ital" in font or "Obli" in font
        mono = bool(flags & 8) or bool(_MONO_FONT.search(font))
        style = _style_cache[key] = int(bold) | (2 if italic else 0) | (4 if mono else 0)
    return style


# A piece is one MuPDF line: (x0, y0, x1, y1, spans, cell) with spans as (text, size, style) and
# cell its text with its box, for table cells (only where its exact box is known, else None).
Span = tuple[str, float, int]
RawPiece = tuple[float, float, float, float, list[Span], Any]
# a ruling stroke: (x0, x1, y) when horizontal, (x, y0, y1) when vertical
Rule = tuple[float, float, float]


def _merge_same_baseline(pieces: list[RawPiece]) -> list[list[RawPiece]]:
    """Group a block's MuPDF lines that sit on one baseline ("1" + "Introduction")."""
    groups: list[list[RawPiece]] = []
    for piece in pieces:
        if groups:
            last = groups[-1][-1]
            if abs(last[3] - piece[3]) < 2.0 and piece[0] >= last[0]:
                groups[-1].append(piece)
                continue
        groups.append([piece])
    return groups


def _make_line(group: list[RawPiece]) -> Line | None:
    """Merge one baseline's MuPDF lines: text, dominant size, boldness, bold run-in prefix.

    This runs for every line of every page (the largest Python cost of a parse); a line alone
    on its baseline (nearly all) takes ``_piece_line``.
    """
    if len(group) == 1:
        return _piece_line(*group[0])
    kept: list[RawPiece] = []
    texts: list[str] = []
    for piece in group:
        spans = piece[4]
        piece_text = spans[0][0] if len(spans) == 1 else "".join([span[0] for span in spans])
        if not piece_text or piece_text.isspace():
            continue
        kept.append(piece)
        texts.append(piece_text)
    if not kept:
        return None
    if len(kept) == 1:
        x0, y0, x1, y1, _, cell = kept[0]
        cells = [cell] if cell else []
    else:
        x0, y0 = min(p[0] for p in kept), min(p[1] for p in kept)
        x1, y1 = max(p[2] for p in kept), max(p[3] for p in kept)
        cells = [p[5] for p in kept if p[5]]
    spans = kept[0][4] if len(kept) == 1 else [span for piece in kept for span in piece[4]]
    return _line_from_spans(x0, y0, x1, y1, " ".join(texts), spans, cells)


def _line_from_spans(x0: float, y0: float, x1: float, y1: float, text: str, spans: list[Span], cells: Any) -> Line:
    """A baseline's ``Line`` from its text (not blank) and its spans in reading order: the size most
    characters have, bold/italic/monospaced when every character is, and a bold run-in prefix
    ("**Method.** We ..."). A span of spaces only counts for nothing. Characters are counted per
    span only when the spans' sizes differ: this runs for every line with more than one span."""
    first_size = spans[0][1]
    same_size = True
    every = 7  # the style bits every non-blank span has
    for span_text, span_size, style in spans:
        if span_size != first_size:
            same_size = False
        if style & every != every and span_text.strip(" "):
            every &= style
    chars = len(text) - text.count(" ")  # ``text`` holds every span's characters
    if same_size:
        size = round(first_size * 2) / 2
    else:
        sizes: dict[float, int] = {}
        for span_text, span_size, _ in spans:
            n = len(span_text) - span_text.count(" ")
            if n:
                key = round(span_size * 2) / 2
                sizes[key] = sizes.get(key, 0) + n
        size = max(sizes, key=sizes.__getitem__) if len(sizes) > 1 else next(iter(sizes), 0.0)
    bold_prefix = ""
    if not every & 1:
        prefix: list[str] = []
        for span_text, _, style in spans:
            if not span_text.strip(" "):
                if prefix:  # a space between two bold words keeps the run-in prefix going
                    prefix.append(span_text)
            elif style & 1:
                prefix.append(span_text)
            else:
                break
        if prefix:
            bold_prefix = " ".join("".join(prefix).split()).rstrip(" ([{")
            if len(bold_prefix) < 3 or not _TWO_LETTERS.search(bold_prefix):
                bold_prefix = ""
    bold, italic, mono = _STYLE_FLAGS[every] if chars else (False, False, False)
    return Line(x0, y0, x1, y1, clean_line(" ".join(text.split())), size, bold, bold_prefix, chars, cells, italic, mono)


# MuPDF's HTML output of a text page: one <p> per line (its left edge, the first character's
# baseline minus 0.8 of its size, that size), one <span> per style run inside it, opened by
# <sup>/<tt>/<b>/<i> when the font is superscript/monospaced/bold/italic. Both kinds of token
# start with the literal "<" and the opening tags are one group ("b><i><"): ``re`` scans for a
# pattern that starts with a literal about twice as fast as for one that starts with optional groups.
_HTML_TOKEN = re.compile(
    r'<(?:p style="top:([-\d.]+)pt;left:([-\d.]+)pt;line-height:([\d.]+)pt">'
    r'|((?:[a-z]+><)*span style="font-family:[^;"]*);font-size:([\d.]+)pt[^"]*">([^<]*)</span>)'
)
_FAMILY = 'span style="font-family:'

_ENTITY = re.compile(r"&(?:#x([0-9a-fA-F]+)|(lt|gt|amp|quot|apos));")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def _unescape(text: str) -> str:
    """MuPDF writes ``&lt;``/``&gt;``/``&amp;`` and every non-ASCII character as ``&#x…;``, control
    characters included (which ``html.unescape`` would drop, and the ``dict`` output keeps)."""
    if "&" not in text:
        return text
    return _ENTITY.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1) else _NAMED[m.group(2)], text)


_tags_style_cache: dict[str, int] = {}


def _html_style(key: str) -> int:
    """A span's style from its opening tags and font ('b><i><span style="font-family:CMBX12,serif'),
    cached per such string."""
    tags, _, font = key.partition(_FAMILY)
    names = tags.replace("<", "").split(">")
    flags = (8 if "tt" in names else 0) | (16 if "b" in names else 0) | (2 if "i" in names else 0)
    style = _tags_style_cache[key] = _font_style(flags, font)
    return style


# style bits → (bold, italic, monospaced)
_STYLE_FLAGS = tuple((bool(s & 1), bool(s & 2), bool(s & 4)) for s in range(8))


def _piece_line(x0: float, y0: float, x1: float, y1: float, spans: list[Span], cell: Piece | None = None) -> Line | None:
    """``_make_line`` of one MuPDF line alone on its baseline, the common case, without the group;
    one span (most lines) without the counting loop."""
    if len(spans) == 1:
        text, size, style = spans[0]
        if not text or text.isspace():
            return None
        bold, italic, mono = _STYLE_FLAGS[style]
        return Line(x0, y0, x1, y1, clean_line(" ".join(text.split())), round(size * 2) / 2, bold, "",
                    len(text) - text.count(" "), [cell] if cell else (), italic, mono)
    whole = "".join([span[0] for span in spans])
    if not whole or whole.isspace():
        return None
    return _line_from_spans(x0, y0, x1, y1, whole, spans, [cell] if cell else ())


def extract_page(page: Any, number: int) -> PageData:
    """One page's text blocks (horizontal text only) and its horizontal rules.

    Why two extractions of one MuPDF text page: building ``get_text("dict")`` costs twice the
    text page itself (a Python dict per span), more than the whole parse may. The page's HTML
    carries what the heading and paragraph rules read (each line's text, left edge, baseline,
    and every style run's font, size, bold/italic/monospaced) and its blocks carry their boxes;
    together they cost a fraction of the dict. Blocks that need more take their lines' exact
    boxes from the page's XML without its characters (``_page_boxes``), and only they: a block
    whose box its lines do not explain (superscripts, large math, text that is not horizontal),
    and on a page with a table caption the blocks that meet a ruled table region (table cells
    need each text piece's box). When the HTML and the blocks' boxes do not fit together at all
    (a box around a figure's labels takes in the next block's lines), every block comes so.
    The ``dict`` reads a page only when the XML and the HTML disagree about its lines.
    """
    import pymupdf

    # no images (not used), ligatures expanded ("ﬁ" → "fi": words stay searchable), clipped to the page
    flags = (pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES & ~pymupdf.TEXT_PRESERVE_LIGATURES) | pymupdf.TEXT_MEDIABOX_CLIP
    textpage = page.get_textpage(flags=flags)
    rows, led = _html_lines(textpage.extractHTML())
    html = _blocks_from_html(textpage, rows, led, number)
    if html is None:
        whole = _blocks_from_boxes(_page_boxes(textpage), rows, number)
        if whole is None:
            return _page_from_dict(page, textpage, number)
        return _whole_page(page, number, whole)
    indexed: list[tuple[int, TextBlock]] | None = html.blocks
    done = set(html.unexplained)
    boxed: list[_BoxedBlock] | None = None
    if done:
        boxed = _page_boxes(textpage)
        indexed = _rebuild_from_boxes(boxed, html, html.blocks, done, number)
        if indexed is None:
            return _page_from_dict(page, textpage, number)
    blocks = [block for _, block in indexed]
    if not _has_table_caption(blocks):
        return _finish_page(page, number, blocks, [], [], bool(done))
    rules, verticals = _rules(page)
    regions = table_regions(rules)
    wanted: set[int] = set()
    if regions:
        boxed = boxed or _page_boxes(textpage)
        if len(boxed) != len(html.text_blocks):
            return _page_from_dict(page, textpage, number, (rules, verticals))
        wanted = {
            i for (x0, y0, x1, y1), i in ((block.box, i) for block, i in zip(boxed, html.text_blocks))
            if i not in done and any(not (x1 <= g[0] or g[2] <= x0 or y1 <= g[1] or g[3] <= y0) for g in regions)
        }
        if wanted:
            indexed = _rebuild_from_boxes(boxed, html, indexed, wanted, number)
            if indexed is None:
                return _page_from_dict(page, textpage, number, (rules, verticals))
            blocks = [block for _, block in indexed]
    return _finish_page(page, number, blocks, rules, verticals, bool(done or wanted))


def _page_from_dict(page: Any, textpage: Any, number: int, drawn: tuple[list[Rule], list[Rule]] | None = None) -> PageData:
    """The whole page from the ``dict`` output; its drawings read (or taken from ``drawn``) only
    when it has a table caption."""
    return _whole_page(page, number, [block for _, block in _blocks_from_dict(textpage.extractDICT()["blocks"], number)], drawn)


def _whole_page(page: Any, number: int, blocks: list[TextBlock], drawn: tuple[list[Rule], list[Rule]] | None = None) -> PageData:
    """A page whose every block carries its lines' boxes (table cells); its drawings read (or taken
    from ``drawn``) only when it has a table caption."""
    if not _has_table_caption(blocks):
        drawn = ([], [])
    elif drawn is None:
        drawn = _rules(page)
    return _finish_page(page, number, blocks, drawn[0], drawn[1], True)


# MuPDF's XML of a text page without its characters: a ``<block bbox=…>`` per text block, in the
# text page's order, and in it a ``<line bbox=… wmode=… dir=… flags=… text=…/>`` per line, in the
# order the HTML writes them (``<`` never occurs inside an attribute: the text is escaped). A line
# written otherwise is not matched: its block then holds fewer lines than the HTML gives it.
_XML_BOX = re.compile(r'<(?:block bbox="(\S+ \S+ \S+ \S+)"|line bbox="(\S+ \S+ \S+ \S+)" wmode="[^"]*" dir="(\S+ \S+)" flags="[^"]*" text="([^"]*)")')


@dataclass(slots=True)
class _BoxedBlock:
    """A text block's box, and its lines as the XML writes them: (box, direction, text); read into
    numbers only for the blocks rebuilt."""

    box: tuple[float, float, float, float]
    lines: list[tuple[str, str, str]]


def _page_boxes(textpage: Any) -> list[_BoxedBlock]:
    """Every text block's box and its lines' exact boxes, directions and text, as the ``dict``
    gives them but in one string: no Python object per span and character."""
    import pymupdf.mupdf as mupdf

    buffer = mupdf.fz_new_buffer(8192)
    out = mupdf.FzOutput(buffer)
    mupdf.fz_print_stext_page_as_xml_with_flags(out, textpage.this, 0, 0)  # flags 0: no characters
    out.fz_close_output()
    blocks: list[_BoxedBlock] = []
    for block_box, *line in _XML_BOX.findall(buffer.fz_buffer_extract().decode("utf-8", "replace")):
        if block_box:
            x0, y0, x1, y1 = map(float, block_box.split())
            blocks.append(_BoxedBlock((x0, y0, x1, y1), []))
        elif blocks:
            blocks[-1].lines.append(line)  # type: ignore[arg-type]
    return blocks


def _block_from_boxes(boxed: _BoxedBlock, rows: list[HtmlLine], number: int) -> TextBlock | None:
    """A block from its lines' exact boxes and their HTML spans, as ``_blocks_from_dict`` builds one
    from the ``dict``: horizontal lines only, lines on one baseline merged, each line's text piece
    kept with its box for table cells."""
    pieces: list[RawPiece] = []
    for (box, direction, _), row in zip(boxed.lines, rows):
        dx, dy = map(float, direction.split())
        if abs(dy) < 0.05 and dx > 0:  # horizontal text only
            x0, y0, x1, y1 = map(float, box.split())
            spans = row[3]
            pieces.append((x0, y0, x1, y1, spans, _cell(x0, y0, x1, y1, "".join([span[0] for span in spans]))))
    lines = [ln for ln in map(_make_line, _merge_same_baseline(pieces)) if ln is not None]
    if not lines:
        return None
    if len(lines) == len(boxed.lines):  # nothing dropped: MuPDF's block box is the box
        x0, y0, x1, y1 = boxed.box
    else:
        x0, y0 = min(ln.x0 for ln in lines), min(ln.y0 for ln in lines)
        x1, y1 = max(ln.x1 for ln in lines), max(ln.y1 for ln in lines)
    return TextBlock(number, x0, y0, x1, y1, lines)


def _cell(x0: float, y0: float, x1: float, y1: float, text: str) -> Piece | None:
    """A line's text piece with its box, for table cells (``None`` when blank)."""
    text = clean_line(text.strip()).replace(SOFT_HYPHEN, "")
    return Piece(x0, y0, x1, y1, text) if text else None


def _blocks_from_boxes(boxed: list[_BoxedBlock], rows: list[HtmlLine], number: int) -> list[TextBlock] | None:
    """Every block of the page from its lines' boxes, the HTML's lines taken in order by count;
    ``None`` when the two do not hold the same lines."""
    if sum(len(block.lines) for block in boxed) != len(rows):
        return None
    out: list[TextBlock] = []
    at = 0
    for block in boxed:
        block_rows = rows[at:at + len(block.lines)]
        at += len(block.lines)
        if not _same_text(block, block_rows):
            return None
        built = _block_from_boxes(block, block_rows, number)
        if built is not None:
            out.append(built)
    return out


# what the XML writes as U+FFFD and the HTML as itself: control characters (unmapped glyphs)
_UNPRINTABLE = dict.fromkeys([*range(32), 0xFFFD])


def _same_text(boxed: _BoxedBlock, rows: list[HtmlLine]) -> bool:
    """The XML's lines and the HTML's hold the same characters (white space and control
    characters aside)."""
    from_xml = "".join([text for _, _, text in boxed.lines])
    from_xml = _unescape(from_xml) if "&" in from_xml else from_xml
    from_html = "".join([span[0] for row in rows for span in row[3]])
    return "".join(from_xml.split()).translate(_UNPRINTABLE) == "".join(from_html.split()).translate(_UNPRINTABLE)


def _rebuild_from_boxes(boxed: list[_BoxedBlock], html: _HtmlPage, indexed: list[tuple[int, TextBlock]],
                        wanted: set[int], number: int) -> list[tuple[int, TextBlock]] | None:
    """``indexed`` with the blocks ``wanted`` (text page indices) rebuilt from their lines' exact
    boxes; ``None`` when the XML does not hold the lines the HTML gave them."""
    if len(boxed) != len(html.text_blocks):
        return None
    rebuilt: list[tuple[int, TextBlock]] = []
    lines, starts = html.lines, html.starts
    for block, i in zip(boxed, html.text_blocks):
        if i not in wanted:
            continue
        rows = lines[starts[i]:starts[i + 1]]
        if len(block.lines) != len(rows) or not _same_text(block, rows):
            return None  # the HTML gave this block lines that are not its own
        built = _block_from_boxes(block, rows, number)
        if built is not None:
            rebuilt.append((i, built))
    merged = [(i, block) for i, block in indexed if i not in wanted] + rebuilt
    merged.sort(key=lambda item: item[0])  # the text page's order
    return merged


def _has_table_caption(blocks: list[TextBlock]) -> bool:
    """A block's first or second line reads like a table caption."""
    for block in blocks:
        for line in block.lines[:2]:
            # a caption starts with T: the first letter spares the pattern on other lines
            if line.text[:1] in "Tt" and _TABLE_CAPTION.match(line.text):
                return True
    return False


# an HTML line: (left edge, baseline, largest size, spans)
HtmlLine = tuple[float, float, float, list[Span]]
_END_TOKEN = ("0", "0", "1", "", "", "")  # a line start after the last line


@dataclass(slots=True)
class _HtmlPage:
    """What the HTML and the block list give together."""

    blocks: list[tuple[int, TextBlock]]  # the blocks the HTML explains, with their index in the text page
    unexplained: list[int]  # indices of text blocks whose box their HTML lines do not explain
    lines: list[HtmlLine]
    starts: list[int]  # block i's lines are lines[starts[i]:starts[i + 1]]
    text_blocks: list[int]  # the text blocks' indices, in order


def _html_lines(html: str) -> tuple[list[HtmlLine], list[int]]:
    """The page's lines in order, each (left, baseline, largest size, spans), and those led by a
    smaller style run (a footnote mark: its HTML baseline is the mark's)."""
    html_lines: list[HtmlLine] = []
    led: list[int] = []  # lines whose first style run is smaller than their largest (a footnote mark)
    spans: list[Span] = []
    cache = _tags_style_cache
    left = baseline = first = largest = 0.0
    started = False
    tokens = _HTML_TOKEN.findall(html)
    tokens.append(_END_TOKEN)  # closes the last line
    for top, x, height, key, size, text in tokens:
        if top:
            if started:
                if len(spans) > 1:
                    # a mark set at about two thirds of the text's size; far smaller (a bullet
                    # scaled down to a point) sits on the line's own baseline
                    if 0.4 * largest < spans[0][1] < 0.85 * largest:
                        led.append(len(html_lines))
                    html_lines.append((left, baseline, largest, spans))
                else:
                    html_lines.append((left, baseline, first, spans))
            started, first, largest = True, float(height), 0.0
            left, baseline, spans = float(x), float(top) + 0.8 * first, []
            continue
        style = cache.get(key)
        if style is None:
            style = _html_style(key)
        span_size = float(size)
        if span_size > largest:
            largest = span_size
        spans.append((_unescape(text) if "&" in text else text, span_size, style))
    return html_lines, led


def _blocks_from_html(textpage: Any, html_lines: list[HtmlLine], led: list[int], number: int) -> _HtmlPage | None:
    """Blocks from the page's HTML lines and block list; ``None`` when they do not fit together."""
    at = 0
    blocks: list[tuple[int, TextBlock]] = []
    unexplained: list[int] = []
    starts: list[int] = []  # each block's first line in ``html_lines``
    text_blocks: list[int] = []  # the text blocks' indices
    total = len(html_lines)
    raw = textpage.this.m_internal.first_block
    while raw is not None:
        index = len(starts)
        starts.append(at)
        if raw.type != 0:
            raw = raw.next
            continue
        text_blocks.append(index)
        r = raw.bbox
        bx0, by0, bx1, by1 = r.x0, r.y0, r.x1, r.y1
        raw = raw.next
        start = at
        # the block's lines are the next ones in the HTML that lie inside its box
        x_lo, y_lo, y_hi = bx0 - 0.5, by0 - 0.5, by1 + 0.5
        while at < total:
            row = html_lines[at]
            if not (x_lo <= row[0] <= bx1 and y_lo <= row[1] <= y_hi):
                break
            at += 1
        if at == start:
            return None  # a line outside its block's box: the two do not fit together
        if at - start == 1:  # the common one-line block: the line's box is the block's
            first_row = html_lines[start]
            if by1 - by0 > 2.5 * max(first_row[2], 1.0) and len("".join(s[0] for s in first_row[3]).strip()) > 1:
                continue  # one line in a box far taller than its font: rotated (an arXiv margin stamp)
            line = _piece_line(first_row[0], by0, bx1, by1, first_row[3])
            if line is not None:
                blocks.append((index, TextBlock(number, bx0, by0, bx1, by1, [line])))
            continue
        rows = html_lines[start:at]
        count = len(rows)
        # the block box is the union of its lines' boxes: its top is the first line's top, its
        # bottom the last line's bottom; the font's ascent and descent per point follow from them.
        # With both in range no line reaches beyond the box (the first line's top and the last
        # one's bottom are the box's own); a last line of size 0 gives no descent to check.
        first_row, last_row = rows[0], rows[-1]
        ascent = (first_row[1] - by0) / first_row[2] if first_row[2] else 0.0
        descent = (by1 - last_row[1]) / last_row[2] if last_row[2] else 0.0
        if (
            not (0.3 < ascent < 1.3)
            or not (-0.1 < descent < 0.6)
            or (not last_row[2] and by1 > max(b + 0.6 * s for _, b, s, _ in rows) + 1.0)
            # a line led by smaller type (a footnote mark): its HTML baseline is that mark's
            or (led and (k := bisect_left(led, start)) < len(led) and led[k] < at)
        ):
            unexplained.append(index)
            continue
        # lines on one baseline ("1" + "Introduction") are merged, as ``_merge_same_baseline``
        # does; a line alone on its baseline (nearly all) goes straight to ``_piece_line``
        lines: list[Line] = []
        group: list[RawPiece] | None = None  # the pieces of the current baseline, once it has two
        p_left = p_y0 = p_y1 = 0.0
        p_spans: list[Span] | None = None  # the previous row's spans
        for left, baseline, size, spans in rows:
            y1 = baseline + descent * size
            if p_spans is not None:
                if abs(p_y1 - y1) < 2.0 and left >= p_left:
                    if group is None:
                        group = [(p_left, p_y0, bx1, p_y1, p_spans, None)]
                    p_left, p_y0, p_y1, p_spans = left, baseline - ascent * size, y1, spans
                    group.append((p_left, p_y0, bx1, p_y1, p_spans, None))
                    continue
                line = _piece_line(p_left, p_y0, bx1, p_y1, p_spans) if group is None else _make_line(group)
                group = None
                if line is not None:
                    lines.append(line)
            p_left, p_y0, p_y1, p_spans = left, baseline - ascent * size, y1, spans
        line = _piece_line(p_left, p_y0, bx1, p_y1, p_spans) if group is None else _make_line(group)  # type: ignore[arg-type]
        if line is not None:
            lines.append(line)
        if not lines:
            continue
        if len(lines) == count:
            x0, y0, x1, y1 = bx0, by0, bx1, by1
        else:  # a blank line dropped: the box shrinks to the lines kept (their right edge is unknown)
            x0, y0 = min(ln.x0 for ln in lines), min(ln.y0 for ln in lines)
            x1, y1 = bx1, max(ln.y1 for ln in lines)
        blocks.append((index, TextBlock(number, x0, y0, x1, y1, lines)))
    if at != total:
        return None
    starts.append(at)
    return _HtmlPage(blocks, unexplained, html_lines, starts, text_blocks)


def _blocks_from_dict(raw_blocks: list[dict[str, Any]], number: int,
                      indices: list[int] | None = None) -> list[tuple[int, TextBlock]]:
    """Blocks from PyMuPDF's ``dict`` blocks, each with its index in the text page's block list
    (``indices``: of each raw block; all of the page's blocks when not given)."""
    blocks: list[tuple[int, TextBlock]] = []
    cache = _style_cache
    for at, raw_block in enumerate(raw_blocks):
        if raw_block.get("type") != 0:
            continue
        raw_lines = raw_block["lines"]
        pieces: list[RawPiece] = [
            (
                *ln["bbox"],
                [
                    (s["text"], s["size"], cache[key] if (key := (s["flags"] & 26, s["font"])) in cache else _font_style(*key))
                    for s in ln["spans"]
                ],
                _dict_cell(ln),
            )
            for ln in raw_lines
            if abs(ln["dir"][1]) < 0.05 and ln["dir"][0] > 0  # horizontal text only
        ]
        lines = [ln for ln in map(_make_line, _merge_same_baseline(pieces)) if ln is not None]
        if not lines:
            continue
        if len(lines) == len(raw_lines):  # nothing dropped: PyMuPDF's block box is the box
            x0, y0, x1, y1 = raw_block["bbox"]
        else:
            x0, y0 = min(ln.x0 for ln in lines), min(ln.y0 for ln in lines)
            x1, y1 = max(ln.x1 for ln in lines), max(ln.y1 for ln in lines)
        blocks.append((at if indices is None else indices[at], TextBlock(number, x0, y0, x1, y1, lines)))
    return blocks


def _dict_cell(line: dict[str, Any]) -> Piece | None:
    """A ``dict`` line's text piece with its box, for table cells (``None`` when blank)."""
    x0, y0, x1, y1 = line["bbox"]
    return _cell(x0, y0, x1, y1, "".join([span["text"] for span in line["spans"]]))


def _finish_page(page: Any, number: int, blocks: list[TextBlock], rules: list[Rule], verticals: list[Rule],
                 with_cells: bool) -> PageData:
    image_area = 0.0
    if not blocks:
        # only needed to tell an image-only (scanned) PDF from an empty one
        image_area = sum(abs(info["bbox"][2] - info["bbox"][0]) * abs(info["bbox"][3] - info["bbox"][1]) for info in page.get_image_info())
    rect = page.rect
    data = PageData(number, float(rect.width), float(rect.height), blocks, rules, image_area, verticals)
    if rules:
        apply_tables(page, data)
    # the text pieces were needed for table cells only; dropping them here keeps the parse's live
    # objects (what every full garbage-collector pass walks) to one record a line
    if with_cells:
        for block in data.blocks:
            for line in block.lines:
                line.cells = ()
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
    keys: dict[int, str] = {}  # id(block) → its margin key, for the blocks in the margins only
    page_edges: list[list[TextBlock]] = []
    for page in pages:
        top, bottom = page.height * 0.09, page.height * 0.91  # the bands ``_margin_key`` reads
        page_keys: set[str] = set()
        for block in page.blocks:
            if block.y1 < top or block.y0 > bottom:
                key = keys[id(block)] = _margin_key(block, page.height)  # type: ignore[assignment]
                page_keys.add(key)
        for key in page_keys:
            counts[key] += 1
        edges = _edge_blocks(page)
        page_edges.append(edges)
        for offset in {o for o in (_folio_offset(b, page) for b in edges) if o is not None}:
            offsets[offset] += 1
    threshold = max(2, int(len(pages) * 0.3))
    folio = {o for o, n in offsets.items() if n >= max(3, int(len(pages) * 0.2))}
    for page, edges in zip(pages, page_edges):
        kept = []
        if not folio:
            edges = []
        for block in page.blocks:
            key = keys.get(id(block))
            if key is not None and (counts[key] >= threshold or _PAGE_NUMBER.match(block.text.strip())):
                continue
            if edges and (block is edges[0] or block is edges[-1]) and _folio_offset(block, page) in folio:
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
    # the length of each block's text (its lines joined by spaces) without joining them
    left = sum(sum(len(ln.text) for ln in b.lines) + len(b.lines) - 1 for b, c in zip(page.blocks, cols) if c == "L")
    right = sum(sum(len(ln.text) for ln in b.lines) + len(b.lines) - 1 for b, c in zip(page.blocks, cols) if c == "R")
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
