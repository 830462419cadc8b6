"""Tables: regions found from ruling lines, cells from text geometry, Markdown pipe tables.

``page.find_tables()`` costs 30-100 ms a page even clipped to a region (it re-extracts every
character of the page), a hundred times the text extraction, and misreads booktabs tables
(rules without verticals). So regions come from the cheap drawing list: horizontal rules
sharing an x-extent. A ruled grid is cut along its own rules; a booktabs table is rebuilt
from the columns of its text pieces.
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from .page import Line, PageData, Piece, TextBlock

Region = tuple[float, float, float, float]


def table_regions(rules: list[tuple[float, float, float]]) -> list[Region]:
    """Stacks of ≥ 2 horizontal rules (x0, x1, y) with the same x-extent, at least a text line apart."""
    clusters: list[list[tuple[float, float, float]]] = []
    for rule in sorted(rules, key=lambda r: (r[0], r[1], r[2])):
        for cluster in clusters:
            if abs(cluster[0][0] - rule[0]) < 4 and abs(cluster[0][1] - rule[1]) < 4:
                cluster.append(rule)
                break
        else:
            clusters.append([rule])
    regions: list[Region] = []
    for cluster in clusters:
        ys = sorted({round(r[2]) for r in cluster})
        if len(ys) < 2 or ys[-1] - ys[0] < 12:
            continue
        x0 = min(r[0] for r in cluster)
        x1 = max(r[1] for r in cluster)
        region = (x0 - 2, ys[0] - 1.5, x1 + 2, ys[-1] + 1.5)
        if not any(_overlaps(region, other) for other in regions):
            regions.append(region)
    return regions


def _overlaps(a: Region, b: Region) -> bool:
    return not (a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1])


def _inside(line: Line | Piece, region: Region) -> bool:
    cx = (line.x0 + line.x1) / 2
    cy = (line.y0 + line.y1) / 2
    return region[0] <= cx <= region[2] and region[1] <= cy <= region[3]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def rows_to_markdown(rows: list[list[str]]) -> str:
    width = max(len(r) for r in rows)
    rows = [[_cell(c) for c in r] + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def build_from_pieces(pieces: list[Piece], row_rules: list[float] | None = None) -> list[list[str]] | None:
    """Rows by baseline, columns from the union of the x-intervals of the pieces below the header's rule.

    ``row_rules``: the y of the rules drawn across the table between its top and bottom, top first. With two or
    more (a rule under every row, not only booktabs' one under the header), a row is what lies between
    two rules: a line whose first cell is empty belongs to the row of its own band, also when it comes
    before that row's first cell (a name centred beside a description of several lines)."""
    if len(pieces) < 4:
        return None
    heights = sorted(p.y1 - p.y0 for p in pieces)
    tol = max(2.0, heights[len(heights) // 2] * 0.5)
    rows: list[list[Piece]] = []
    for piece in sorted(pieces, key=lambda p: ((p.y0 + p.y1) / 2, p.x0)):
        cy = (piece.y0 + piece.y1) / 2
        if rows and abs(cy - (rows[-1][0].y0 + rows[-1][0].y1) / 2) <= tol:
            rows[-1].append(piece)
        else:
            rows.append([piece])
    # columns from the body, below the header's rule: a group header spanning several columns
    # ("AutoScholarQuery" over three) would merge them, and every value under it with them
    rules = row_rules or []
    body = [p for p in pieces if rules and (p.y0 + p.y1) / 2 > rules[0]]
    intervals = _columns(body)
    if len(intervals) < 2:
        intervals = _columns(pieces)
    if len(intervals) < 2 or len(rows) < 2:
        return None
    separators = rules if len(rules) >= 2 else []
    table: list[list[str]] = []
    band_start = 0  # index in table of the first row of the current band
    band = 0
    waiting: list[str] | None = None  # leading wrapped lines of a band, before the row they belong to
    for row in rows:
        cells = [""] * len(intervals)
        for piece in sorted(row, key=lambda p: p.x0):
            cx = (piece.x0 + piece.x1) / 2
            col = next((i for i, (a, b) in enumerate(intervals) if a - 1 <= cx <= b + 1), None)
            if col is None:  # between columns (a header centred over two): the nearest
                col = min(range(len(intervals)), key=lambda i: min(abs(cx - intervals[i][0]), abs(cx - intervals[i][1])))
            cells[col] = (cells[col] + " " + piece.text).strip()
        row_band = bisect.bisect(separators, (row[0].y0 + row[0].y1) / 2)
        if row_band != band:  # a rule was crossed: what waited stays a row of its own
            if waiting is not None:
                table.append(waiting)
                waiting = None
            band, band_start = row_band, len(table)
        wrapped = not cells[0] and sum(1 for c in cells if c) < len(cells)
        if wrapped and len(table) > band_start:
            # a wrapped cell: continue the previous row instead of starting a new one
            table[-1] = _joined(table[-1], cells)
        elif wrapped and separators:
            waiting = cells if waiting is None else _joined(waiting, cells)
        else:
            table.append(cells if waiting is None else _joined(waiting, cells))
            waiting = None
    if waiting is not None:
        table.append(waiting)
    if len(table) < 2:
        return None
    return table


def _columns(pieces: list[Piece]) -> list[list[float]]:
    """The union of the pieces' x-intervals: one interval a column."""
    intervals: list[list[float]] = []
    for piece in sorted(pieces, key=lambda p: p.x0):
        if intervals and piece.x0 <= intervals[-1][1] + 1.0:
            intervals[-1][1] = max(intervals[-1][1], piece.x1)
        else:
            intervals.append([piece.x0, piece.x1])
    return intervals


def _joined(first: list[str], then: list[str]) -> list[str]:
    return [(a + " " + b).strip() for a, b in zip(first, then)]


def grid_rows(region: Region, verticals: list[float], horizontals: list[float], pieces: list[Piece]) -> list[list[str]] | None:
    """A ruled grid: columns between vertical rules, rows between horizontal rules."""
    xs = _dedupe(sorted(verticals))
    ys = _dedupe(sorted(horizontals))
    if len(xs) < 3 or len(ys) < 3:
        return None
    rows = [[""] * (len(xs) - 1) for _ in range(len(ys) - 1)]
    for piece in sorted(pieces, key=lambda p: (p.y0, p.x0)):
        cx = (piece.x0 + piece.x1) / 2
        cy = (piece.y0 + piece.y1) / 2
        col = next((i for i in range(len(xs) - 1) if xs[i] <= cx <= xs[i + 1]), None)
        row = next((i for i in range(len(ys) - 1) if ys[i] <= cy <= ys[i + 1]), None)
        if col is not None and row is not None:
            rows[row][col] = (rows[row][col] + " " + piece.text).strip()
    rows = [r for r in rows if any(r)]
    return rows if len(rows) >= 2 else None


def _row_rules(region: Region, rules: list[tuple[float, float, float]]) -> list[float]:
    """Rules across (nearly) the whole table, strictly between its top and bottom rules."""
    x0, y0, x1, y1 = region
    across = [r[2] for r in rules if y0 + 3 < r[2] < y1 - 3 and min(r[1], x1) - max(r[0], x0) >= 0.8 * (x1 - x0)]
    return _dedupe(sorted(across))


def _dedupe(values: list[float]) -> list[float]:
    out: list[float] = []
    for v in values:
        if not out or v - out[-1] > 3:
            out.append(v)
    return out


def _filled(rows: list[list[str]]) -> float:
    cells = [c for r in rows for c in r]
    return sum(1 for c in cells if c) / max(1, len(cells))


_CAPTION = re.compile(r"(?:Table|TABLE|Tab\.)\s*[0-9IVX]+[.:]")


def _split_at_captions(region: Region, rules: list[tuple[float, float, float]], lines: list[Line]) -> list[Region]:
    """Two tables of the same width stacked on a page share one cluster of rules: cut the region where a
    caption lies between two of its rules, and leave the caption out of both."""
    cuts: list[tuple[float, float]] = []
    ys = _row_rules(region, rules)
    for line in lines:
        if _CAPTION.match(line.text.strip()):
            above = [y for y in ys if y <= line.y0]
            below = [y for y in ys if y >= line.y1]
            if above and below:
                cuts.append((max(above), min(below)))
    if not cuts:
        return [region]
    parts: list[Region] = []
    top = region[1]
    for upper, lower in sorted(set(cuts)):
        parts.append((region[0], top, region[2], upper + 1.5))
        top = lower - 1.5
    parts.append((region[0], top, region[2], region[3]))
    return [part for part in parts if part[3] - part[1] >= 12]


def apply_tables(page: Any, data: PageData) -> None:
    """Replace the text lines inside each detected table by one table block."""
    regions: list[Region] = []
    for found in table_regions(data.rules):
        regions += _split_at_captions(found, data.rules, [ln for b in data.blocks for ln in b.lines if _inside(ln, found)])
    for region in regions:
        lines_inside = [ln for b in data.blocks for ln in b.lines if _inside(ln, region)]
        if len(lines_inside) < 2:
            continue
        pieces = [p for ln in lines_inside for p in ln.cells]
        verticals = [v[0] for v in data.verticals if region[0] - 2 <= v[0] <= region[2] + 2 and v[1] < region[3] and v[2] > region[1]]
        rows = None
        if len(verticals) >= 2:
            horizontals = [r[2] for r in data.rules if region[1] <= r[2] <= region[3] and r[0] < region[2] and r[1] > region[0]]
            rows = grid_rows(region, verticals, horizontals, pieces)
        if rows is None:
            rows = build_from_pieces(pieces, _row_rules(region, data.rules))
        if rows is None or _filled(rows) < 0.5:
            continue
        kept: list[TextBlock] = []
        for block in data.blocks:
            outside = [ln for ln in block.lines if not _inside(ln, region)]
            if len(outside) == len(block.lines):  # untouched: its box stays as extracted
                kept.append(block)
                continue
            block.lines = outside
            if block.lines:
                block.x0 = min(ln.x0 for ln in block.lines)
                block.y0 = min(ln.y0 for ln in block.lines)
                block.x1 = max(ln.x1 for ln in block.lines)
                block.y1 = max(ln.y1 for ln in block.lines)
                kept.append(block)
        marker = Line(region[0], region[1], region[2], region[3], "", 0.0, False)
        kept.append(TextBlock(data.number, region[0], region[1], region[2], region[3], [marker], rows_to_markdown(rows)))
        data.blocks = kept
