"""Clean sections: code, signatures and page furniture never become headings; precision against
the PDF outline; chunks carry their heading path so a question naming a section finds it."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from astro_jupyter.services.parse.chunking import PATH_SEP, chunk_sections
from astro_jupyter.services.parse.document import normalise_heading, read_sections
from astro_jupyter.services.parse.pdf import parse_pdf

DATA = Path(__file__).resolve().parents[1] / "data" / "pdfs"
# real headings that outlines usually leave out
UNLISTED = {"abstract", "contents", "table of contents", "references", "bibliography", "acknowledgements",
            "acknowledgments", "index"}


def heading_precision(path: Path) -> tuple[float, list[str]] | None:
    """Share of our headings that are in the PDF's outline (or are the title or a heading outlines
    omit, such as Abstract); None when the PDF has no outline."""
    with pymupdf.open(str(path)) as doc:
        toc = doc.get_toc()
    if not toc:
        return None
    parsed = parse_pdf(path)
    outline = {normalise_heading(title) for _, title, _ in toc}
    heads = [b for b in parsed.blocks + parsed.references if b.kind == "heading"]
    wrong = [b.text for b in heads if b.level > 1 and normalise_heading(b.text) not in outline | UNLISTED]
    return 1 - len(wrong) / max(1, len(heads)), wrong


def make_manual(path: Path) -> Path:
    """A software manual as LaTeX sets one: a contents page, "Chapter N" over the chapter title,
    running heads with page numbers whose text follows the section, bold code and signatures."""
    doc = pymupdf.open()
    toc: list[list] = []

    def page(number: int, head: str | None) -> tuple[pymupdf.Page, list[float]]:
        p = doc.new_page(width=595, height=842)
        if head:
            p.insert_text((72, 60), head, fontsize=10, fontname="helv")
        return p, [110.0]

    def line(p: pymupdf.Page, y: list[float], text: str, size: float = 10, font: str = "helv") -> None:
        p.insert_text((72, y[0]), text, fontsize=size, fontname=font)
        y[0] += size * 1.5

    body = ("The library reads and writes files in the standard format used by observatories. "
            "Each routine returns a status value that the caller should test before going on. ")
    p, y = page(1, None)
    line(p, y, "Astro Library User Guide", 20, "hebo")
    y[0] += 20
    line(p, y, "Contents", 14, "hebo")
    for entry in ("1 Introduction 2", "2 Using the Library 3", "2.1 Opening files 3", "3 Magic files 4",
                  "4 Security implications 5"):
        line(p, y, entry, 11, "hebo")
    toc.append([1, "Contents", 1])
    p, y = page(2, None)
    line(p, y, "Chapter 1", 16, "hebo")
    line(p, y, "Introduction", 18, "hebo")
    toc.append([1, "1 Introduction", 2])
    for _ in range(4):
        line(p, y, body[:90])
        line(p, y, body[90:])
    p, y = page(3, "3 CHAPTER 2. USING THE LIBRARY")
    line(p, y, "Chapter 2", 16, "hebo")
    line(p, y, "Using the Library", 18, "hebo")
    toc.append([1, "2 Using the Library", 3])
    line(p, y, "2.1 Opening files", 12, "hebo")
    toc.append([2, "2.1 Opening files", 3])
    line(p, y, "Open a file before reading it; the call below is the usual way.")
    line(p, y, "int fits_open_file(fitsfile **fptr, char *name, int mode, int *status);", 10, "hebo")
    line(p, y, "ret len unsigned char str int", 10, "hebo")
    line(p, y, "status = fits_close_file(fptr, &status);", 10, "cobo")
    line(p, y, "Example Program", 10, "cobo")
    for _ in range(3):
        line(p, y, body[:90])
    p, y = page(4, "3. MAGIC FILES 4")
    line(p, y, "3 Magic files", 14, "hebo")
    toc.append([1, "3 Magic files", 4])
    for _ in range(3):
        line(p, y, "Each entry names a byte offset, a type and a value to compare; a match names the format.")
    p, y = page(5, "5 CHAPTER 4. SECURITY IMPLICATIONS")
    line(p, y, "4 Security implications", 14, "hebo")
    toc.append([1, "4 Security implications", 5])
    for _ in range(3):
        line(p, y, "Never execute a program fetched from an untrusted server without checking its signature.")
    p, y = page(6, "4.1. TRUST 6")
    line(p, y, "4.1 Trust", 12, "hebo")
    toc.append([2, "4.1 Trust", 6])
    line(p, y, "Keys are distributed with the release.")
    doc.set_toc(toc)
    doc.save(str(path))
    return path


@pytest.fixture(scope="module")
def manual(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_manual(tmp_path_factory.mktemp("manual") / "manual.pdf")


def test_code_signatures_and_furniture_never_become_headings(manual: Path) -> None:
    parsed = parse_pdf(manual)
    heads = [(b.level, b.text) for b in parsed.blocks if b.kind == "heading"]
    assert heads == [
        (1, "Astro Library User Guide"),
        (2, "Contents"),
        (2, "1 Introduction"),
        (2, "2 Using the Library"),
        (3, "2.1 Opening files"),
        (2, "3 Magic files"),
        (2, "4 Security implications"),
        (3, "4.1 Trust"),
    ]
    md = parsed.to_markdown()
    # the code stays in the text, as text; the running heads and contents entries are gone as headings
    assert "int fits_open_file(fitsfile **fptr" in md and "ret len unsigned char str int" in md
    assert "CHAPTER 2. USING THE LIBRARY" not in md and "3. MAGIC FILES 4" not in md
    assert heading_precision(manual) == (1.0, [])


@pytest.mark.parametrize("name", ["two_column.pdf", "many_pages.pdf", "aas_style.pdf"])
def test_heading_precision_on_generated_pdfs(name: str) -> None:
    precision, wrong = heading_precision(DATA / name)
    assert precision >= 0.95, wrong


def test_heading_precision_on_every_shared_pdf_with_an_outline(shared_pdfs: Path) -> None:
    measured = {p.name: heading_precision(p) for p in sorted(shared_pdfs.glob("*.pdf"))}
    with_outline = {name: m for name, m in measured.items() if m is not None}
    assert "pasa.pdf" in with_outline
    for name, (precision, wrong) in with_outline.items():
        assert precision >= 0.95, (name, wrong)


def test_chunks_carry_their_heading_path(shared_pdfs: Path) -> None:
    chunks = chunk_sections(read_sections(parse_pdf(shared_pdfs / "pasa.pdf").to_markdown()))
    sections = {c.section for c in chunks}
    assert "4 Methodology › 4.2 Crawler" in sections and "1 Introduction" in sections
    assert all(PATH_SEP not in c.section for c in chunks if c.part == "references")


@pytest.mark.asyncio
async def test_a_question_naming_a_section_finds_it_by_its_heading(services, manual: Path) -> None:
    """The magic section's text never says "magic": its heading, indexed with the chunk, does."""
    from tests.agent.tools.paper_support import add_and_parse, run_tool

    paper_id = await add_and_parse(services, manual)
    out = await run_tool(services, "rag_search", {"query": "how do magic files work?", "k": 3})
    assert not out.is_error and out.metadata["hits"][0]["section"] == "3 Magic files"
    fts = await services.rag.search("trust keys", 3, mode="fts", paper_ids=[paper_id])
    assert fts[0].chunk.section == "4 Security implications › 4.1 Trust"
