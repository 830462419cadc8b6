"""Generate the test PDFs (PyMuPDF only): run ``python tests/data/make_pdfs.py [outdir]``.

- ``two_column.pdf``: a two-column paper with a title, numbered sections and subsections,
  a running header and page numbers, a ruled grid table and a booktabs table, a figure
  caption, non-ASCII text (accents, Greek, CJK), a references section and an outline.
- ``many_pages.pdf``: 60 single-column pages with numbered sections and an outline.
- ``aas_style.pdf``: the AASTeX look — Times, section titles in plain capitals
  ("1. INTRODUCTION"), subsections in italics ("2.1. Imaging"), no bold, with an outline.
- ``encrypted.pdf`` (user password), ``corrupt.pdf`` (a truncated header), ``image_only.pdf``
  (a scanned-looking page: one image, no text).

The texts are made up; ``FACTS`` are sentences the retrieval tests and benchmark look for.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pymupdf

HERE = Path(__file__).resolve().parent
OUT = HERE / "pdfs"
W, H = 595.0, 842.0
MARGIN = 56.0
GUTTER = 20.0
BODY = 10.0

FACTS = {
    "twocol-intro": "The Andromeda galaxy hosts a supermassive black hole of about one hundred million solar masses.",
    "twocol-method": "We measured rotation curves with the Very Large Array at a wavelength of twenty-one centimetres.",
    "twocol-result": "The dark matter halo of the dwarf galaxy follows a cored Burkert profile rather than a cusp.",
    "twocol-nonascii": "Schrödinger and Ångström would enjoy α-Centauri observed from 東京 by a naïve observer.",
    "many-dust": "Interstellar dust grains polarise starlight because they are aligned by magnetic fields.",
    "many-pulsar": "Millisecond pulsars are spun up by accretion from a companion star in a binary system.",
    "aas-intro": "Tidal tails of globular clusters stretch for tens of degrees across the outer Galactic halo.",
}

FILLER = (
    "Observations of nearby systems constrain models of structure formation, and careful calibration of the "
    "instrument response removes most of the systematic error. We compare the measurements with simulations "
    "and discuss the remaining uncertainties in turn. "
)


class Writer:
    """Flows wrapped text into columns, page after page, recording the outline."""

    def __init__(self, doc: pymupdf.Document, columns: int, header: str = "", family: str = "helv") -> None:
        self.doc = doc
        self.columns = columns
        self.header = header
        times = family == "times"
        self.regular = pymupdf.Font("tiro" if times else "helv")
        self.bold = pymupdf.Font("tibo" if times else "hebo")
        self.italic = pymupdf.Font("tiit" if times else "heit")
        self.cjk = pymupdf.Font("cjk")
        self.toc: list[list] = []
        self._widths: dict[tuple[str, int, float], float] = {}
        self.page: pymupdf.Page | None = None
        self.col = 0
        self.y = 0.0
        self.new_page()

    @property
    def col_width(self) -> float:
        return (W - 2 * MARGIN - GUTTER * (self.columns - 1)) / self.columns

    @property
    def x(self) -> float:
        return MARGIN + self.col * (self.col_width + GUTTER)

    def new_page(self) -> None:
        self.page = self.doc.new_page(width=W, height=H)
        n = self.doc.page_count
        if self.header:
            self._line(self.header, MARGIN, 34, self.regular, 8)
        self._line(str(n), W / 2 - 4, H - 30, self.regular, 9)
        self.col = 0
        self.y = MARGIN + 10

    def _font_for(self, text: str, font: pymupdf.Font) -> pymupdf.Font:
        return self.cjk if any(ord(c) > 0x2E80 for c in text) else font

    def _line(self, text: str, x: float, y: float, font: pymupdf.Font, size: float) -> None:
        """One span per run of text in one font (real PDFs have few spans a line)."""
        writer = pymupdf.TextWriter(self.page.rect)
        runs: list[tuple[pymupdf.Font, str]] = []
        for word in text.split(" "):
            f = self._font_for(word, font)
            if runs and runs[-1][0] is f:
                runs[-1] = (f, runs[-1][1] + " " + word)
            else:
                runs.append((f, word if not runs else " " + word))
        cursor = x
        for f, run in runs:
            writer.append((cursor, y), run, font=f, fontsize=size)
            cursor += sum(self.width(w, f, size) for w in run.split(" ")) + self.width(" ", f, size) * run.count(" ")
        writer.write_text(self.page)

    def _advance(self, height: float) -> None:
        if self.y + height > H - MARGIN:
            if self.col + 1 < self.columns:
                self.col += 1
                self.y = self.top
            else:
                self.new_page()
                self.top = MARGIN + 10

    top = MARGIN + 10

    def width(self, text: str, font: pymupdf.Font, size: float) -> float:
        """Cached text widths: ``Font.text_length`` is slow per character."""
        key = (text, id(font), size)
        if key not in self._widths:
            self._widths[key] = self._font_for(text, font).text_length(text, fontsize=size)
        return self._widths[key]

    def wrap(self, text: str, font: pymupdf.Font, size: float, width: float) -> list[str]:
        lines: list[str] = []
        current: list[str] = []
        used = 0.0
        space = self.width(" ", font, size)
        for word in text.split():
            w = self.width(word, font, size)
            if current and used + space + w > width:
                lines.append(" ".join(current))
                current, used = [word], w
            else:
                used += (space if current else 0.0) + w
                current.append(word)
        if current:
            lines.append(" ".join(current))
        return lines

    def paragraph(self, text: str, *, font: pymupdf.Font | None = None, size: float = BODY, gap: float = 6) -> None:
        font = font or self.regular
        for line in self.wrap(text, font, size, self.col_width):
            self._advance(size * 1.3)
            self._line(line, self.x, self.y + size, font, size)
            self.y += size * 1.3
        self.y += gap

    def heading(self, text: str, level: int, size: float, font: pymupdf.Font | None = None) -> None:
        self._advance(size * 4)
        self.y += 4
        self.toc.append([level, text.split(" ", 1)[1] if text[0].isdigit() else text, self.doc.page_count])
        self.paragraph(text, font=font or self.bold, size=size, gap=4)

    def full_width_title(self, text: str, size: float) -> None:
        self._line(text, MARGIN, self.y + size, self.bold, size)
        self.y += size * 2.2
        self.top = self.y

    def grid_table(self, rows: list[list[str]], size: float = 9) -> None:
        """A ruled table (horizontal and vertical lines) in the current column."""
        row_h = size * 1.8
        self._advance(row_h * len(rows) + 10)
        x0, width = self.x, self.col_width
        cols = len(rows[0])
        cw = width / cols
        shape = self.page.new_shape()
        top = self.y
        for r in range(len(rows) + 1):
            shape.draw_line((x0, top + r * row_h), (x0 + width, top + r * row_h))
        for c in range(cols + 1):
            shape.draw_line((x0 + c * cw, top), (x0 + c * cw, top + row_h * len(rows)))
        shape.finish(color=(0, 0, 0), width=0.6)
        shape.commit()
        for r, row in enumerate(rows):
            for c, cell in enumerate(row):
                font = self.bold if r == 0 else self.regular
                self._line(cell, x0 + c * cw + 3, top + r * row_h + size * 1.3, font, size)
        self.y = top + row_h * len(rows) + 8

    def booktabs_table(self, rows: list[list[str]], size: float = 9) -> None:
        """Top, mid and bottom rules only (the LaTeX booktabs look)."""
        row_h = size * 1.6
        self._advance(row_h * len(rows) + 14)
        x0, width = self.x, self.col_width
        cw = width / len(rows[0])
        top = self.y
        shape = self.page.new_shape()
        for y in (top, top + row_h + 2, top + row_h * len(rows) + 4):
            shape.draw_line((x0, y), (x0 + width, y))
        shape.finish(color=(0, 0, 0), width=0.6)
        shape.commit()
        for r, row in enumerate(rows):
            y = top + (r * row_h) + size * 1.25 + (3 if r else 0)
            for c, cell in enumerate(row):
                self._line(cell, x0 + c * cw + 2, y, self.regular, size)
        self.y = top + row_h * len(rows) + 12


def two_column(path: Path) -> None:
    doc = pymupdf.open()
    w = Writer(doc, columns=2, header="Journal of Synthetic Astronomy 12 (2026)")
    w.full_width_title("Dark Matter in Dwarf Galaxies: A Synthetic Study", 17)
    w.toc.append([1, "Abstract", 1])
    w.paragraph("Abstract", font=w.bold, size=11, gap=2)
    w.paragraph("We present a synthetic paper used to test the parser. " + FILLER)
    w.heading("1 Introduction", 1, 12)
    w.paragraph(FACTS["twocol-intro"] + " " + FILLER * 2)
    w.paragraph(FACTS["twocol-nonascii"] + " " + FILLER)
    w.heading("2 Observations and Methods", 1, 12)
    w.heading("2.1 Radio data", 2, 10.5)
    w.paragraph(FACTS["twocol-method"] + " " + FILLER * 3)
    w.grid_table([["Galaxy", "Distance", "Mass"], ["DDO 154", "4.0 Mpc", "3e9"], ["NGC 2366", "3.2 Mpc", "1e9"]])
    w.paragraph("Table 1: Properties of the sample galaxies.", size=9)
    w.heading("2.2 Optical data", 2, 10.5)
    w.paragraph(FILLER * 4)
    w.paragraph("Figure 1: Rotation curves of the sample with the best-fitting halo models.", size=9)
    w.heading("3 Results", 1, 12)
    w.paragraph(FACTS["twocol-result"] + " " + FILLER * 3)
    w.booktabs_table([["Model", "chi2", "BIC"], ["Burkert", "1.02", "210.4"], ["NFW", "1.87", "245.9"]])
    w.paragraph("Table 2: Goodness of fit of the halo models.", size=9)
    w.paragraph(FILLER * 5)
    w.heading("4 Conclusions", 1, 12)
    w.paragraph("Cored profiles describe the sample best. " + FILLER * 2)
    w.toc.append([1, "References", doc.page_count])
    w.paragraph("References", font=w.bold, size=12, gap=4)
    for i in range(1, 9):
        w.paragraph(f"[{i}] Author A., Author B. {2000 + i}, The Astrophysical Journal, {600 + i}, {i * 11}.", size=8.5, gap=2)
    doc.set_toc(w.toc)
    doc.subset_fonts()
    doc.save(path, garbage=4, deflate=True)


def many_pages(path: Path, pages: int = 60) -> None:
    doc = pymupdf.open()
    w = Writer(doc, columns=1, header="Lecture Notes on the Interstellar Medium")
    w.full_width_title("Lecture Notes on the Interstellar Medium", 18)
    section = 0
    facts = [FACTS["many-dust"], FACTS["many-pulsar"]]
    while doc.page_count < pages:
        section += 1
        w.heading(f"{section} Topic number {section} of the course", 1, 13)
        for sub in range(1, 3):
            w.heading(f"{section}.{sub} Part {sub} of topic {section}", 2, 11)
            extra = facts.pop(0) + " " if facts and sub == 2 else ""
            w.paragraph(extra + FILLER * 6)
    doc.set_toc(w.toc)
    doc.subset_fonts()
    doc.save(path, garbage=4, deflate=True)


def aas_style(path: Path) -> None:
    """AASTeX look: Times, section titles in plain capitals ("1. INTRODUCTION"), subsections in italics."""
    doc = pymupdf.open()
    w = Writer(doc, columns=1, header="Draft version December 2, 2026", family="times")
    w.full_width_title("Tidal Tails of Globular Clusters in the Outer Halo", 14)
    w.paragraph("Ada Lovelace and Émile Châtelet", size=10)
    w.heading("ABSTRACT", 1, BODY, font=w.regular)
    w.paragraph("We trace tidal tails around outer-halo globular clusters. " + FILLER)
    w.heading("1. INTRODUCTION", 1, BODY, font=w.regular)
    w.paragraph(FACTS["aas-intro"] + " " + FILLER * 3)
    w.heading("2. OBSERVATIONS AND DATA REDUCTION", 1, BODY, font=w.regular)
    w.heading("2.1. Imaging", 2, BODY, font=w.italic)
    w.paragraph(FILLER * 4)
    w.heading("2.2. Spectroscopy", 2, BODY, font=w.italic)
    w.paragraph(FILLER * 4)
    w.heading("3. RESULTS", 1, BODY, font=w.regular)
    w.paragraph(FILLER * 5)
    w.heading("4. CONCLUSIONS", 1, BODY, font=w.regular)
    w.paragraph(FILLER * 2)
    w.heading("REFERENCES", 1, BODY, font=w.regular)
    for i in range(1, 6):
        w.paragraph(f"Author, C. {2010 + i}, AJ, {140 + i}, {i * 7}", size=9, gap=2)
    doc.set_toc(w.toc)
    doc.subset_fonts()
    doc.save(path, garbage=4, deflate=True)


def encrypted(path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Secret results that need a password.", fontsize=12)
    doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="hunter2", owner_pw="owner-pw")


def corrupt(path: Path) -> None:
    path.write_bytes(b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R\nthis file was cut off in transfer")


def image_only(path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=W, height=H)
    pix = pymupdf.Pixmap(pymupdf.csGRAY, pymupdf.IRect(0, 0, 120, 160), False)
    pix.clear_with(200)
    page.insert_image(pymupdf.Rect(MARGIN, MARGIN, W - MARGIN, H - MARGIN), pixmap=pix)
    doc.save(path, garbage=4, deflate=True)


def main(outdir: Path = OUT) -> list[Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    made = []
    for name, fn in (
        ("two_column.pdf", two_column),
        ("many_pages.pdf", many_pages),
        ("aas_style.pdf", aas_style),
        ("encrypted.pdf", encrypted),
        ("corrupt.pdf", corrupt),
        ("image_only.pdf", image_only),
    ):
        target = outdir / name
        fn(target)
        made.append(target)
    return made


if __name__ == "__main__":
    for p in main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT):
        print(p, p.stat().st_size)
