"""``%astro library``: bring a local PDF into the library from a cell and list it."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError


def _write_pdf(path: Path, title: str) -> Path:
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 96), title, fontsize=18)
    page.insert_text((72, 140), "Satellite kinematics constrain the halo mass beyond 100 kpc.", fontsize=10)
    doc.set_metadata({"title": title, "author": "A. Observer; B. Theorist"})
    doc.save(str(path))
    doc.close()
    return path


def test_library_add_then_list(load, project: Path) -> None:
    pdf = _write_pdf(project / "halo.pdf", "Halo Mass from Satellites")
    ip = load()
    added = ip.run_line_magic("astro", f"library add {pdf} --no-fetch")
    assert added.rows[0]["title"] == "Halo Mass from Satellites"
    assert added.rows[0]["state"] == "parsed"  # parsed and indexed at add: searchable at once
    assert Path(added.rows[0]["pdf_path"]).is_file()

    listing = ip.run_line_magic("astro", "library list")
    assert [row["id"] for row in listing.rows] == [added.rows[0]["id"]]
    assert "Halo Mass from Satellites" in listing._repr_html_()
    assert ip.run_line_magic("astro", "library list --state downloaded").rows == []


def test_library_errors_are_clear(load, project: Path) -> None:
    ip = load()
    with pytest.raises(UsageError, match="give a PDF path"):
        ip.run_line_magic("astro", "library add")
    with pytest.raises(UsageError, match="no such PDF file"):
        ip.run_line_magic("astro", f"library add {project / 'missing.pdf'}")
    empty = ip.run_line_magic("astro", "library list")
    assert empty.rows == [] and "library is empty" in repr(empty)


def test_adding_the_same_pdf_again_says_already_in_the_library(load, project: Path) -> None:
    pdf = _write_pdf(project / "halo.pdf", "Halo Mass from Satellites")
    ip = load()
    first = ip.run_line_magic("astro", f"library add {pdf} --no-fetch")
    assert first.title.startswith("added ")
    again = ip.run_line_magic("astro", f"library add {pdf} --no-fetch")
    assert again.title == f"already in the library ({first.rows[0]['id']})"
    assert "already in the library" in again._repr_html_()
    assert len(ip.run_line_magic("astro", "library list").rows) == 1


def test_library_results_convert_to_astropy_and_pandas(load, project: Path) -> None:
    from astropy.table import Table

    _write_pdf(project / "a.pdf", "Halo Mass from Satellites")
    _write_pdf(project / "b.pdf", "Streams in the Outer Halo")
    ip = load()
    for name in ("a.pdf", "b.pdf"):
        ip.run_line_magic("astro", f"library add {project / name} --no-fetch")
    papers = ip.run_line_magic("astro", "library list")
    table = papers.to_table()
    assert isinstance(table, Table) and len(table) == 2
    assert sorted(table["title"]) == ["Halo Mass from Satellites", "Streams in the Outer Halo"]
    assert list(table["authors"])[0] == "A. Observer; B. Theorist"  # lists become one text cell
    frame = papers.to_pandas()
    assert list(frame.sort_values("title")["state"]) == ["parsed", "parsed"]
    assert frame["authors"].iloc[0] == ["A. Observer", "B. Theorist"]
