"""Identifier parsing: every form a person pastes maps to one normalised identifier and library id."""

from __future__ import annotations

import pytest

from astro_jupyter.services.identifiers import (
    IdentifierError,
    parse_identifier,
    paper_id_for,
    pdf_filename,
    slugify,
)


@pytest.mark.parametrize(
    ("text", "kind", "value", "version", "paper_id"),
    [
        ("2301.01234v2", "arxiv", "2301.01234", "v2", "arxiv:2301.01234"),
        ("2301.01234", "arxiv", "2301.01234", "", "arxiv:2301.01234"),
        ("  arXiv:0805.2366v5 ", "arxiv", "0805.2366", "v5", "arxiv:0805.2366"),
        ("astro-ph/0601001", "arxiv", "astro-ph/0601001", "", "arxiv:astro-ph/0601001"),
        ("arXiv:astro-ph/0601001v3", "arxiv", "astro-ph/0601001", "v3", "arxiv:astro-ph/0601001"),
        ("math.GT/0309136", "arxiv", "math.GT/0309136", "", "arxiv:math.GT/0309136"),
        ("1501.00001v10", "arxiv", "1501.00001", "v10", "arxiv:1501.00001"),
        ("10.3847/1538-4357/ab042c", "doi", "10.3847/1538-4357/ab042c", "", "doi:10.3847/1538-4357/ab042c"),
        ("doi:10.1051/0004-6361/201117353", "doi", "10.1051/0004-6361/201117353", "", None),
        ("10.48550/arXiv.2301.01234", "arxiv", "2301.01234", "", "arxiv:2301.01234"),
        ("2019ApJ...873..111I", "bibcode", "2019ApJ...873..111I", "", "bib:2019ApJ...873..111I"),
        ("2012A&A...538A...8S", "bibcode", "2012A&A...538A...8S", "", "bib:2012A&A...538A...8S"),
        ("bibcode:1929PNAS...15..168H", "bibcode", "1929PNAS...15..168H", "", None),
        ("https://arxiv.org/abs/2301.01234v2", "arxiv", "2301.01234", "v2", None),
        ("https://arxiv.org/pdf/2301.01234v1.pdf", "arxiv", "2301.01234", "v1", None),
        ("http://export.arxiv.org/abs/astro-ph/0601001", "arxiv", "astro-ph/0601001", "", None),
        ("https://ui.adsabs.harvard.edu/abs/2019ApJ...873..111I/abstract", "bibcode", "2019ApJ...873..111I", "", None),
        ("https://doi.org/10.3847/1538-4357/ab042c", "doi", "10.3847/1538-4357/ab042c", "", None),
        ("https://dx.doi.org/10.1073/pnas.15.3.168", "doi", "10.1073/pnas.15.3.168", "", None),
        ("local:my-notes-2024", "local", "my-notes-2024", "", "local:my-notes-2024"),
        ("arxiv:2301.01234", "arxiv", "2301.01234", "", "arxiv:2301.01234"),
        ("doi:10.3847/1538-4357/AB042C", "doi", "10.3847/1538-4357/AB042C", "", "doi:10.3847/1538-4357/ab042c"),
    ],
)
def test_parse_forms(text: str, kind: str, value: str, version: str, paper_id: str | None) -> None:
    ident = parse_identifier(text)
    assert ident.kind == kind
    assert ident.value == value
    assert ident.version == version
    if paper_id is not None:
        assert ident.paper_id == paper_id


def test_library_id_round_trips() -> None:
    for text in ["2301.01234v2", "astro-ph/0601001", "10.3847/1538-4357/ab042c", "2019ApJ...873..111I"]:
        ident = parse_identifier(text)
        again = parse_identifier(ident.paper_id)
        assert (again.kind, again.value) == (ident.kind, ident.value if ident.kind != "doi" else ident.value.lower())


@pytest.mark.parametrize(
    "text", ["", "   ", "galaxy", "1234.5", "10.12/x", "https://example.com/paper.pdf", "2019ApJ873", "arxiv:notanid"]
)
def test_rejects_non_identifiers_with_a_helpful_message(text: str) -> None:
    with pytest.raises(IdentifierError) as info:
        parse_identifier(text)
    assert str(info.value)


def test_error_message_lists_accepted_forms() -> None:
    with pytest.raises(IdentifierError, match="arXiv id.*DOI.*bibcode"):
        parse_identifier("dark matter")


def test_paper_id_preference_and_filenames() -> None:
    assert paper_id_for("2301.01234", "10.1/x", "2019ApJ...873..111I") == "arxiv:2301.01234"
    assert paper_id_for(None, "10.1/ABC", "2019ApJ...873..111I") == "doi:10.1/abc"
    assert paper_id_for(None, None, "2019ApJ...873..111I") == "bib:2019ApJ...873..111I"
    assert paper_id_for(None, None, None) is None
    assert pdf_filename("arxiv:astro-ph/0601001") == "arxiv_astro-ph_0601001.pdf"
    assert pdf_filename("bib:2012A&A...538A...8S") == "bib_2012A_A...538A...8S.pdf"
    assert "/" not in pdf_filename("doi:10.3847/1538-4357/ab042c")


def test_slugify_unicode_titles() -> None:
    assert slugify("Ž. Ivezić: Sánchez & the LSST!") == "z-ivezic-sanchez-the-lsst"
    assert slugify("日本語") == "paper"


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(st.text(max_size=300))
def test_pdf_filename_never_escapes_papers_dir(paper_id: str) -> None:
    name = pdf_filename(paper_id)
    assert name.endswith(".pdf") and "/" not in name and "\\" not in name
    assert not name.startswith(".")  # no hidden files, no "..": a stem never starts with a dot
    assert len(name) <= 154


@given(
    st.integers(min_value=7, max_value=29),
    st.integers(min_value=1, max_value=12),
    st.integers(min_value=0, max_value=99999),
    st.integers(min_value=0, max_value=30),
)
def test_new_style_arxiv_ids_round_trip(yy: int, mm: int, number: int, version: int) -> None:
    digits = 5 if yy >= 15 else 4
    base = f"{yy:02d}{mm:02d}.{number % (10 ** digits):0{digits}d}"
    text = base + (f"v{version}" if version else "")
    ident = parse_identifier(text)
    assert (ident.kind, ident.value, ident.version) == ("arxiv", base, f"v{version}" if version else "")
    assert parse_identifier(ident.paper_id).value == base
    assert parse_identifier(f"https://arxiv.org/abs/{text}").value == base


@given(st.text(max_size=80))
def test_parse_never_crashes_on_garbage(text: str) -> None:
    try:
        ident = parse_identifier(text)
    except IdentifierError:
        return
    assert ident.value and ident.kind in {"arxiv", "doi", "bibcode", "local"}
