"""PDF → Markdown: headings, reading order, tables, captions, references, errors."""

from __future__ import annotations

import re
from pathlib import Path

import pymupdf
import pytest

from astro_jupyter.services.parse.document import normalise_heading, read_sections
from astro_jupyter.services.parse.pdf import ParseError, parse_pdf

PDFS = Path(__file__).resolve().parents[1] / "data" / "pdfs"


def outline_recall(path: Path) -> tuple[float, list[str]]:
    """Share of the PDF's own outline entries found among our Markdown headings."""
    toc = pymupdf.open(str(path)).get_toc()
    doc = parse_pdf(path)
    ours = {normalise_heading(h) for h in doc.headings()}
    missing = [title for _, title, _ in toc if normalise_heading(title) not in ours]
    return 1 - len(missing) / len(toc), missing


@pytest.fixture(scope="module")
def two_column_md() -> str:
    return parse_pdf(PDFS / "two_column.pdf").to_markdown()


def test_outline_recall_on_pasa(shared_pdfs: Path) -> None:
    recall, missing = outline_recall(shared_pdfs / "pasa.pdf")
    assert recall >= 0.9, missing


@pytest.mark.parametrize("name", ["two_column.pdf", "many_pages.pdf", "aas_style.pdf"])
def test_outline_recall_on_generated(name: str) -> None:
    recall, missing = outline_recall(PDFS / name)
    assert recall >= 0.9, missing


def test_heading_levels_follow_numbering(shared_pdfs: Path) -> None:
    md = parse_pdf(shared_pdfs / "pasa.pdf").to_markdown()
    assert "\n# PaSa: An LLM Agent for Comprehensive Academic Paper Search\n" in md
    assert "\n## 1 Introduction\n" in md
    assert "\n### 3.1 AutoScholarQuery\n" in md
    assert "\n## A Implementation Details of the Crawler\n" in md
    assert "\n### A.1 Imitation learning data generation\n" in md
    # author names set in bold are not sections
    assert not re.search(r"^#+ Yichen He", md, re.M)


def test_plain_capital_and_italic_headings_aastex_style() -> None:
    md = parse_pdf(PDFS / "aas_style.pdf").to_markdown()
    for heading in ("## ABSTRACT", "## 1. INTRODUCTION", "## 2. OBSERVATIONS AND DATA REDUCTION", "### 2.1. Imaging",
                    "### 2.2. Spectroscopy", "## 3. RESULTS"):
        assert f"\n{heading}\n" in md
    sections = read_sections(md)
    assert [s.name for s in sections if s.part == "references"] == ["REFERENCES"]
    assert "Ada Lovelace and Émile Châtelet" in md and "## Ada" not in md


def test_two_columns_read_left_then_right(two_column_md: str) -> None:
    md = two_column_md
    order = ["## 1 Introduction", "Andromeda galaxy", "## 2 Observations", "### 2.1 Radio data", "Very Large Array",
             "### 2.2 Optical data", "## 3 Results", "cored Burkert", "## 4 Conclusions"]
    positions = [md.index(s) for s in order]
    assert positions == sorted(positions)


def test_pasa_reading_order_across_columns(shared_pdfs: Path) -> None:
    md = parse_pdf(shared_pdfs / "pasa.pdf").to_markdown()
    # page 3: left column ends with "2 Related Work", right column starts "3 Datasets"
    assert md.index("## 2 Related Work") < md.index("LLMs in Scientific Discovery") < md.index("## 3 Datasets")
    # a paragraph broken across the column is joined with its hyphen removed
    assert "Academic paper search lies at the core of research yet represents a particularly challenging information retrieval task" in md


def test_tables_become_pipe_tables(two_column_md: str) -> None:
    assert "| Galaxy | Distance | Mass |\n| --- | --- | --- |\n| DDO 154 | 4.0 Mpc | 3e9 |" in two_column_md  # ruled grid
    assert "| Model | chi2 | BIC |\n| --- | --- | --- |\n| Burkert | 1.02 | 210.4 |" in two_column_md  # booktabs


def test_booktabs_table_in_real_paper(shared_pdfs: Path) -> None:
    md = parse_pdf(shared_pdfs / "pasa.pdf").to_markdown()
    assert "| Method | Precision | Recall | F1 |" in md
    assert "| GPT-4o | 0.96 | 0.69 | 0.80 |" in md


def test_a_table_ruled_under_every_row_keeps_each_description_beside_its_name(shared_pdfs: Path) -> None:
    """PaSa's Table 3: a rule under every row, each name centred beside a description of two or three
    lines. The description's first line is above its name: it belongs to the name's row, not the one above."""
    md = parse_pdf(shared_pdfs / "pasa.pdf").to_markdown()
    assert "| Name | Implementation |\n| --- | --- |\n" in md
    assert ("| [Search] | Generate a search query and invoke the search tool. Append all resulting papers to the "
            "paper queue. |") in md
    assert "| [Stop] | Reset the context to the user query and the next paper in the paper queue. |" in md


def test_two_tables_stacked_under_rules_of_one_width_stay_two_tables(shared_pdfs: Path) -> None:
    """PaSa p. 8: Tables 5 and 6 are drawn with rules of the same width, one above the other. The
    caption between them is a paragraph, not a row, and each table keeps its seven columns."""
    md = parse_pdf(shared_pdfs / "pasa.pdf").to_markdown()
    header = "| Method | Crawler Recall | Precision | Recall | Recall@100 | Recall@50 | Recall@20 |"
    assert md.count(header) == 2
    assert ("| PaSa-7b-ensemble | 0.8265 | 0.1410 | 0.4985 | 0.7099 | 0.6386 | 0.5326 |\n\n"
            "Table 5: Results on AutoScholarQuery test set.\n\n" + header) in md


def test_a_group_header_over_several_columns_does_not_merge_their_values(shared_pdfs: Path) -> None:
    """PaSa's Table 8: "AutoScholarQuery" and "RealScholarQuery" each head three columns. The columns come from
    the body, so every value keeps a cell of its own (the label joins the column nearest its middle)."""
    md = parse_pdf(shared_pdfs / "pasa.pdf").to_markdown()
    assert "| w/o [Expand] | 0.3355 | 0.1445 | 0.2536 | 0.3359 | 0.6738 | 0.2890 |" in md
    assert "| PaSa-7b | 0.7931 | 0.1448 | 0.4834 | 0.7071 | 0.5146 | 0.6111 |" in md


def test_captions_are_their_own_paragraphs(two_column_md: str) -> None:
    paragraphs = two_column_md.split("\n\n")
    assert "Table 1: Properties of the sample galaxies." in paragraphs
    assert "Figure 1: Rotation curves of the sample with the best-fitting halo models." in paragraphs


def test_non_ascii_text_is_preserved(two_column_md: str) -> None:
    assert "Schrödinger and Ångström would enjoy α-Centauri observed from 東京 by a naïve observer." in two_column_md


def test_running_header_and_page_numbers_removed(two_column_md: str) -> None:
    assert "Journal of Synthetic Astronomy" not in two_column_md
    assert not re.search(r"^\d+$", two_column_md, re.M)


def test_references_are_a_separate_part(two_column_md: str) -> None:
    sections = read_sections(two_column_md)
    refs = [s for s in sections if s.part == "references"]
    assert [s.name for s in refs] == ["References"]
    assert len(refs[0].paragraphs) == 8 and refs[0].paragraphs[0][1].startswith("[1] Author A.")
    body_text = " ".join(t for s in sections if s.part != "references" for _, t in s.paragraphs)
    assert "Astrophysical Journal" not in body_text


def test_pasa_references_separated_and_appendix_kept_in_body(shared_pdfs: Path) -> None:
    sections = read_sections(parse_pdf(shared_pdfs / "pasa.pdf").to_markdown())
    refs = [s for s in sections if s.part == "references"]
    assert refs and refs[0].name == "References"
    assert any(s.name == "A Implementation Details of the Crawler" and s.part == "body" for s in sections)


def test_section_pages_recorded() -> None:
    sections = read_sections(parse_pdf(PDFS / "many_pages.pdf").to_markdown())
    named = {s.name: s for s in sections}
    assert named["1 Topic number 1 of the course"].pages[0] == 1
    last = sections[-1]
    assert last.pages[1] == 60


def test_progress_callback_per_page() -> None:
    seen: list[tuple[int, int]] = []
    parse_pdf(PDFS / "two_column.pdf", on_page=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]


@pytest.mark.parametrize(
    "name, message",
    [
        ("encrypted.pdf", "the PDF is encrypted"),
        ("corrupt.pdf", "not a valid PDF"),
        ("image_only.pdf", "no extractable text: the PDF is image-only (scanned); OCR is not available"),
    ],
)
def test_unusable_pdfs_give_clear_errors(name: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_pdf(PDFS / name)
    assert message in str(info.value)


def test_generator_reproduces_the_committed_pdfs(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_pdfs", PDFS.parent / "make_pdfs.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    made = module.main(tmp_path)
    assert {p.name for p in made} == {p.name for p in PDFS.glob("*.pdf")}
    fresh = parse_pdf(tmp_path / "two_column.pdf").to_markdown()
    assert fresh == parse_pdf(PDFS / "two_column.pdf").to_markdown()


# -- ligatures and words broken across lines ------------------------------------------------------
LIGATURE_CHARS = re.compile("[\ufb00-\ufb06]")


def make_ligature_pdf(path: Path, title: str = "Efficient profile fitting of fluffy haloes") -> Path:
    """A PDF typeset by MuPDF's Story, which sets "fi", "fl", "ff", "ffi" as ligature glyphs."""
    html = (
        f"<h1>{title}</h1><h2>1 Introduction</h2>"
        "<p>The density profile of the dark halo is fitted with an efficient sampler. "
        "The official figures show a flat profile in the outer field, offset from the fluffy disc.</p>"
        "<h2>2 Results</h2><p>A cored profile fits every satellite better than a cusp.</p>"
    )
    story = pymupdf.Story(html=html, user_css="body {font-family: serif; font-size: 11pt;}")
    writer = pymupdf.DocumentWriter(str(path))
    more = True
    while more:
        device = writer.begin_page(pymupdf.paper_rect("a4"))
        more, _ = story.place(pymupdf.Rect(72, 72, 523, 770))
        story.draw(device)
        writer.end_page()
    writer.close()
    return path


@pytest.fixture
def ligature_pdf(tmp_path: Path) -> Path:
    path = make_ligature_pdf(tmp_path / "ligatures.pdf")
    # the premise: the PDF really carries ligature glyphs (MuPDF reports them when asked to keep them)
    with pymupdf.open(str(path)) as doc:
        assert LIGATURE_CHARS.search(doc[0].get_text(flags=pymupdf.TEXT_PRESERVE_LIGATURES))
    return path


def test_ligatures_are_expanded(ligature_pdf: Path) -> None:
    md = parse_pdf(ligature_pdf).to_markdown()
    assert not LIGATURE_CHARS.search(md), LIGATURE_CHARS.findall(md)
    assert "density profile of the dark halo" in md
    for word in ("Efficient profile fitting of fluffy haloes", "efficient sampler", "official figures", "offset", "field"):
        assert word in md


def test_ligature_code_points_in_the_text_layer_are_normalised() -> None:
    """A font whose ToUnicode maps the glyph to U+FB01 itself: MuPDF passes it through."""
    from astro_jupyter.services.parse.text import clean_line, expand_ligatures

    assert expand_ligatures("pro\ufb01le \ufb02at e\ufb00ect e\ufb03cient ba\ufb04e") == "profile flat effect efficient baffle"
    assert clean_line("pro\ufb01le of\u00adfset obser\u00ad") == "profile offset obser\u00ad"


def _lines_pdf(path: Path, lines: list[str]) -> Path:
    doc = pymupdf.open()
    page = doc.new_page()
    y = 100.0
    for line in lines:
        page.insert_text((72, y), line, fontsize=10, fontname="helv")
        y += 12
    doc.save(str(path))
    return path


def test_line_end_hyphens_joined_when_the_word_is_plausible(tmp_path: Path) -> None:
    path = _lines_pdf(tmp_path / "hyphens.pdf", [
        "We present new spectroscopic observa-",
        "tions of the halo at high resolution, with a high-",
        "resolution grating and a well-",
        "known pipeline; the flux calibra-",
        "tion uses a well-known standard and a soft\u00ad",
        "ware package. The Hertzsprung-",
        "Russell diagram of the non-",
        "LTE models.",
    ])
    md = parse_pdf(path).to_markdown()
    assert "spectroscopic observations of the halo" in md
    assert "with a high-resolution grating" in md  # both halves are words here, the joined form is not
    assert "a well-known pipeline" in md  # the hyphenated form occurs elsewhere
    assert "flux calibration uses" in md
    assert "a software package" in md  # a soft hyphen at a line end always closes up
    assert "The Hertzsprung-Russell diagram of the non-LTE models." in md  # a hyphen before a capital is kept
    assert "\u00ad" not in md


@pytest.mark.asyncio
async def test_parsed_chunks_and_content_find_profile(services, ligature_pdf: Path) -> None:
    """What a user sees: get_paper_content and full-text search find "profile", not "proﬁle"."""
    from tests.agent.tools.paper_support import add_and_parse, run_tool

    paper_id = await add_and_parse(services, ligature_pdf)
    record = await services.library.get(paper_id)
    assert "fitting" in record.title and not LIGATURE_CHARS.search(record.title)
    out = await run_tool(services, "get_paper_content", {"paper_id": paper_id, "section": "Introduction"})
    assert not out.is_error, out.content
    assert "density profile of the dark halo" in out.content and not LIGATURE_CHARS.search(out.content)
    chunks = await services.chunks.for_paper(paper_id)
    assert chunks and not any(LIGATURE_CHARS.search(c.text) for c in chunks)
    hits = await services.chunks.fts('"profile"', 10, paper_ids=[paper_id])
    assert len(hits) >= 2  # the Introduction and the Results chunks
    assert await services.chunks.fts('"efficient"', 10, paper_ids=[paper_id])


def _words(page: pymupdf.Page, x: float, y: float, words: list[tuple[str, str]], gap: float = 4.0) -> None:
    """Words set one by one (no space glyphs, as TeX does): MuPDF adds the spaces between them."""
    for text, font in words:
        page.insert_text((x, y), text, fontname=font, fontsize=10)
        x += pymupdf.get_text_length(text, fontname=font, fontsize=10) + gap


def test_bold_run_in_heading_of_several_words_is_kept(tmp_path: Path) -> None:
    """A bold lead-in of two words set word by word ("RL Training" in PaSa): MuPDF makes the space
    between them a span of its own; the lead-in stays one bold run, not lost."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Methods of the crawler", fontname="hebo", fontsize=16)
    _words(page, 72, 110, [("RL", "hebo"), ("Training", "hebo"), ("A", "helv"), ("key", "helv"), ("challenge", "helv")])
    _words(page, 72, 122, [("is", "helv"), ("the", "helv"), ("sampling", "helv"), ("time.", "helv")])
    path = tmp_path / "runin.pdf"
    doc.save(path)
    md = parse_pdf(path).to_markdown()
    assert "**RL Training** A key challenge is the sampling time." in md, md


def test_rotated_margin_stamp_is_dropped_and_markup_characters_kept(tmp_path: Path) -> None:
    """An arXiv-style stamp set vertically in the margin is not text of the paper; characters the
    page's HTML escapes (<, &, non-ASCII) come through as they are."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((30, 600), "arXiv:2501.10120v1 [cs.IR] 17 Jan 2025", fontname="tiro", fontsize=20, rotate=90)
    page.insert_text((72, 72), "1 Introduction", fontname="hebo", fontsize=14)
    page.insert_text((72, 100), "We keep a < b & c > d in the café for every \"quoted\" word.", fontname="tiro", fontsize=10)
    path = tmp_path / "stamp.pdf"
    doc.save(path)
    md = parse_pdf(path).to_markdown()
    assert "arXiv" not in md, md
    assert "# 1 Introduction" in md
    assert 'a < b & c > d in the café for every "quoted" word.' in md, md


# -- table pages: the fast extraction with the table's blocks from the dict ----------------------
def _booktabs_page(path: Path) -> Path:
    """Two columns: a long paragraph on the left beside a booktabs table (top, mid and bottom
    rules) with its caption and text above and below it on the right."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((56, 60), "1 Introduction", fontname="hebo", fontsize=12)
    left = ("The dwarf galaxies of the sample were observed over three seasons with the same setup, "
            "and their rotation curves were measured from the neutral hydrogen velocity fields. ") * 4
    page.insert_textbox(pymupdf.Rect(56, 70, 285, 400), left, fontname="tiro", fontsize=10)
    page.insert_textbox(pymupdf.Rect(310, 70, 540, 120), "We compare the measured curves with two halo models "
                        "fitted to every galaxy in turn.", fontname="tiro", fontsize=10)
    page.insert_text((310, 140), "Table 2: Goodness of fit of the halo models.", fontname="tiro", fontsize=9)
    for y in (150, 166, 214):
        page.draw_line((310, y), (520, y), width=0.6)
    for row, y in ((["Model", "chi2", "BIC"], 161), (["Burkert", "1.02", "210.4"], 180),
                   (["NFW", "1.87", "245.9"], 194), (["Einasto", "1.10", "215.0"], 208)):
        for text, x in zip(row, (314, 400, 470)):
            page.insert_text((x, y), text, fontname="tiro", fontsize=9)
    page.insert_textbox(pymupdf.Rect(310, 230, 540, 300), "The cored profile fits better than the cusp "
                        "in every galaxy of the sample.", fontname="tiro", fontsize=10)
    doc.save(str(path))
    return path


def test_table_on_a_caption_page_keeps_its_cells_and_the_text_around_it(tmp_path: Path) -> None:
    md = parse_pdf(_booktabs_page(tmp_path / "table.pdf")).to_markdown()
    table = ("| Model | chi2 | BIC |\n| --- | --- | --- |\n| Burkert | 1.02 | 210.4 |\n| NFW | 1.87 | 245.9 |\n"
             "| Einasto | 1.10 | 215.0 |")
    assert table in md, md
    paragraphs = md.strip().split("\n\n")
    assert "Table 2: Goodness of fit of the halo models." in paragraphs
    assert "We compare the measured curves with two halo models fitted to every galaxy in turn." in paragraphs
    assert "The cored profile fits better than the cusp in every galaxy of the sample." in paragraphs
    assert md.count("neutral hydrogen velocity fields.") == 4
    # the cells are in the table only, not also as text
    assert md.count("Einasto") == 1 and md.count("210.4") == 1
    # reading order: the left column, then the right one with the table between its paragraphs
    assert md.index("velocity fields") < md.index("We compare") < md.index("| Model") < md.index("The cored profile")


def _pages_as_the_dict_gives_them(path: Path) -> tuple[list[list[str]], list[list[str]]]:
    """Each page's blocks (table Markdown or text) from ``extract_page`` and from the whole-page
    ``dict`` extraction, the reference the page's HTML stands in for."""
    from astro_jupyter.services.parse.layout import _page_from_dict, extract_page

    flags = (pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES & ~pymupdf.TEXT_PRESERVE_LIGATURES) | pymupdf.TEXT_MEDIABOX_CLIP
    fast, reference = [], []
    with pymupdf.open(str(path)) as doc:
        for index, page in enumerate(doc):
            fast.append([b.table or b.text for b in extract_page(page, index + 1).blocks])
            reference.append([b.table or b.text for b in _page_from_dict(page, page.get_textpage(flags=flags), index + 1).blocks])
    return fast, reference


def test_table_pages_read_as_the_whole_page_dict_reads_them(tmp_path: Path) -> None:
    """Table pages: the HTML with only the table's blocks from the ``dict`` gives the same blocks
    and tables as the ``dict`` of the whole page."""
    for path in (PDFS / "two_column.pdf", _booktabs_page(tmp_path / "table.pdf")):
        fast, reference = _pages_as_the_dict_gives_them(path)
        assert fast == reference, path.name
        assert any(b.startswith("| ") for page in fast for b in page), path.name


def test_real_paper_reads_as_the_whole_page_dict_reads_it(shared_pdfs: Path) -> None:
    """PaSa: eleven tables, footnote marks, display math; every page as the whole-page ``dict`` reads it."""
    fast, reference = _pages_as_the_dict_gives_them(shared_pdfs / "pasa.pdf")
    assert fast == reference
    assert sum(b.startswith("| ") for page in fast for b in page) == 11


def test_real_paper_is_read_without_the_dict(shared_pdfs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PaSa's table blocks, display math and figure labels (a box that takes in the next block's
    lines) take their lines' boxes from the page's XML: the costly ``dict`` is never built, and the
    Markdown is what it was with the ``dict`` (the test above: block for block)."""
    built = []
    extract_dict = pymupdf.TextPage.extractDICT
    monkeypatch.setattr(pymupdf.TextPage, "extractDICT", lambda self, *a, **k: built.append(1) or extract_dict(self, *a, **k))
    md = parse_pdf(shared_pdfs / "pasa.pdf").to_markdown()
    assert built == []
    assert md.count("\n| --- |") == 11 and "Table 3: Functions of the Crawler" in md


def test_a_page_whose_xml_and_html_disagree_is_read_from_the_dict(shared_pdfs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the XML does not hold the lines the HTML gave a block, the page is read from the
    ``dict`` instead: the same blocks, nothing lost."""
    from astro_jupyter.services.parse import layout

    page_boxes = layout._page_boxes

    def one_line_short(textpage: object) -> list:
        boxed = page_boxes(textpage)
        for block in boxed:
            if len(block.lines) > 1:
                del block.lines[-1]
                break
        return boxed

    monkeypatch.setattr(layout, "_page_boxes", one_line_short)
    fast, reference = _pages_as_the_dict_gives_them(shared_pdfs / "pasa.pdf")
    assert fast == reference


def test_footnote_led_by_a_superscript_mark_stays_one_paragraph(tmp_path: Path) -> None:
    """A footnote whose mark is set small and raised (as LaTeX does): the page's HTML places the
    line at the mark's baseline, which opened a gap to the next line and split the note in two."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "1 Introduction", fontname="hebo", fontsize=14)
    y = 100.0
    for text in ("The crawler calls the search engine with the parameters of the query and keeps",
                 "the papers it returns; each paper is then read by the selector, which decides",
                 "whether it meets the requirements of the user query that started the search."):
        page.insert_text((72, y), text, fontname="tiro", fontsize=11)
        y += 13.6
    page.insert_text((84, 753.5), "7", fontname="tiro", fontsize=6)
    page.insert_text((87.5, 758.8), "Accessed via the Google Search API provided by https:", fontname="tiro", fontsize=9)
    page.insert_text((72, 771.8), "//serper.dev.", fontname="tiro", fontsize=9)
    path = tmp_path / "footnote.pdf"
    doc.save(str(path))
    md = parse_pdf(path).to_markdown()
    assert "7Accessed via the Google Search API provided by https: //serper.dev." in md.strip().split("\n\n"), md
