"""``astro-jupyter library add/list/show`` as a user runs them (env-configured, against the fakes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from astro_jupyter.cli import main
from tests.fakes.ads_server import TOKEN
from tests.fakes.base import FakeServer
from tests.fakes.file_server import Route, make_pdf

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, ads_fake: FakeServer, arxiv_fake: FakeServer, file_fake: FakeServer) -> dict[str, str]:
    env = {
        "ASTRO_ADS_URL": ads_fake.url,
        "ADS_API_TOKEN": TOKEN,
        "ASTRO_ARXIV_URL": f"{arxiv_fake.url}/api/query",
        "ASTRO_ARXIV_PDF_URL": f"{file_fake.url}/pdf",
        "ASTRO_DOI_URL": f"{file_fake.url}/doi",
        "ASTRO_DOWNLOAD_ALLOWED_HOSTS": "127.0.0.1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_add_pdf_then_list(cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path, astro_home: Path) -> None:
    pdf = tmp_path / "Ivezić draft.pdf"
    pdf.write_bytes(make_pdf("Variable stars in Rubin data"))
    assert main(["library", "add", str(pdf)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("added local:variable-stars-in-rubin-data")
    assert f"PDF: {astro_home / 'papers' / 'local_variable-stars-in-rubin-data.pdf'}" in out
    assert "parsed 1 page into 1 passage (1 embedded): searchable with rag_search" in out
    assert main(["library", "add", "2301.01234v2"]) == 0
    out = capsys.readouterr().out
    assert "arxiv:2301.01234" in out and "metadata" in out and "Quenching of dwarf galaxy satellites" in out
    assert "library add arxiv:2301.01234 --download" in out
    listing = run_json(capsys, "library", "list", "--json")
    assert isinstance(listing, list)
    assert {p["id"]: p["state"] for p in listing} == {
        "local:variable-stars-in-rubin-data": "parsed",
        "arxiv:2301.01234": "metadata",
    }
    assert main(["library", "list", "--state", "parsed"]) == 0
    text = capsys.readouterr().out
    assert "local:variable-stars-in-rubin-data" in text and "arxiv:2301.01234" not in text


def test_add_doi_with_download(cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], file_fake: FakeServer, astro_home: Path) -> None:
    file_fake.state["routes"]["/pdf/1111.0962"] = Route(body=make_pdf("CALIFA"))
    paper = run_json(capsys, "library", "add", "10.1051/0004-6361/201117353", "--download", "--json")
    assert isinstance(paper, dict)
    assert paper["id"] == "arxiv:1111.0962" and paper["state"] == "parsed" and paper["parse"]["chunks"] == 1
    assert paper["authors"][0] == "Sánchez, S. F."
    assert Path(paper["pdf_path"]) == astro_home / "papers" / "arxiv_1111.0962.pdf"
    assert main(["library", "show", "2012A&A...538A...8S"]) == 0
    shown = capsys.readouterr().out
    assert "Library id: arxiv:1111.0962 · status: parsed" in shown and "Citations: 1021" in shown


def test_errors_exit_1_with_a_message(cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["library", "add", "galaxies please"]) == 1
    assert "not a paper identifier" in capsys.readouterr().err
    assert main(["library", "add", str(tmp_path / "nope.pdf")]) == 1
    assert "no such PDF file" in capsys.readouterr().err
    assert main(["library", "show", "arxiv:9999.99999"]) == 1
    assert "not in the library" in capsys.readouterr().err
    assert main(["library", "list"]) == 0
    assert "the library is empty" in capsys.readouterr().out


def test_real_pdf_through_the_installed_command(cli_env: dict[str, str], shared_pdfs: Path, tmp_path: Path, astro_home: Path) -> None:
    src = tmp_path / "paper.pdf"
    shutil.copyfile(shared_pdfs / "paper.pdf", src)
    env = {**os.environ, **cli_env, "ASTRO_HOME": str(astro_home)}
    added = subprocess.run(
        [sys.executable, "-m", "astro_jupyter.cli", "library", "add", str(src), "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )
    assert added.returncode == 0, added.stderr
    paper = json.loads(added.stdout)
    assert paper["title"] == "A Perspective on Explanations of Molecular Prediction Models"
    assert paper["metadata"]["pages"] == 41 and paper["source"] == "local"
    assert paper["state"] == "parsed" and paper["parse"]["pages"] == 41 and paper["parse"]["chunks"] > 40
    listed = subprocess.run(
        [sys.executable, "-m", "astro_jupyter.cli", "library", "list"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )
    assert listed.returncode == 0 and paper["id"] in listed.stdout and "parsed" in listed.stdout
    # searchable at once: the passage that answers comes from the paper just added
    found = subprocess.run(
        [sys.executable, "-m", "astro_jupyter.cli", "tool", "rag_search", "query=explanations of molecular prediction models"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )
    assert found.returncode == 0, found.stderr
    assert f"({paper['id']};" in found.stdout and "Not searchable yet" not in found.stdout


def test_adding_the_same_pdf_or_id_twice_says_already_in_the_library(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pdf = tmp_path / "draft.pdf"
    pdf.write_bytes(make_pdf("Variable stars in Rubin data"))
    assert main(["library", "add", str(pdf)]) == 0
    assert capsys.readouterr().out.startswith("added local:variable-stars-in-rubin-data")
    copy = tmp_path / "copy of draft.pdf"
    shutil.copyfile(pdf, copy)
    assert main(["library", "add", str(copy)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("already in the library (local:variable-stars-in-rubin-data)") and "added" not in out
    assert main(["library", "add", "2301.01234"]) == 0
    assert capsys.readouterr().out.startswith("added arxiv:2301.01234")
    assert main(["library", "add", "arXiv:2301.01234v2"]) == 0
    assert capsys.readouterr().out.startswith("already in the library (arxiv:2301.01234)")
    assert len(run_json(capsys, "library", "list", "--json")) == 2  # type: ignore[arg-type]


def test_a_pdf_keeps_its_own_identity_when_ads_answers_with_another_paper(
    cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], ads_fake: FakeServer, tmp_path: Path
) -> None:
    ads_fake.state["nearest"] = "2019ApJ...873..111I"
    pdf = tmp_path / "pasa.pdf"
    pdf.write_bytes(make_pdf("PaSa: An LLM Agent for Paper Search", extra_text="arXiv:2501.10120v1 [cs.IR] 17 Jan 2025"))
    assert main(["library", "add", str(pdf)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("added arxiv:2501.10120") and "PaSa: An LLM Agent for Paper Search" in out
    assert "LSST" not in out.splitlines()[0]  # only named in the note on what was ignored
    assert "kept the PDF's own" in out and "different paper" in out


EMPTY_PDF = b"%PDF-1.4\n1 0 obj <</Type/Catalog/Pages 2 0 R>> endobj\n2 0 obj <</Type/Pages/Kids[]/Count 0>> endobj\ntrailer <</Root 1 0 R>>\n%%EOF\n"


def test_no_parse_leaves_it_unsearchable_and_says_so(cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pdf = tmp_path / "draft.pdf"
    pdf.write_bytes(make_pdf("Variable stars in Rubin data"))
    assert main(["library", "add", str(pdf), "--no-parse"]) == 0
    out = capsys.readouterr().out
    assert "not searchable until parsed: astro-jupyter tool parse_paper paper_id=local:variable-stars-in-rubin-data" in out
    assert main(["tool", "rag_search", "query=variable stars"]) == 0
    assert "Not searchable yet: 1 paper in the library is downloaded but not parsed: local:variable-stars-in-rubin-data" in capsys.readouterr().out


def test_a_pdf_with_no_pages_is_refused_at_add(cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pdf = tmp_path / "empty.pdf"
    pdf.write_bytes(EMPTY_PDF)
    assert main(["library", "add", str(pdf)]) == 1
    assert "empty.pdf has no pages" in capsys.readouterr().err
    assert run_json(capsys, "library", "list", "--json") == []


def test_a_folder_adds_every_pdf_and_lists_failures(cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "reading list"
    folder.mkdir()
    (folder / "a.pdf").write_bytes(make_pdf("Variable stars in Rubin data"))
    (folder / "B.PDF").write_bytes(make_pdf("Quenching of dwarf satellites"))
    (folder / "broken.pdf").write_bytes(EMPTY_PDF)
    (folder / "notes.txt").write_text("not a paper")
    assert main(["library", "add", str(folder)]) == 1  # one file failed: said, and the rest added
    captured = capsys.readouterr()
    assert "2 added, 0 already in the library, 1 failed" in captured.out
    assert "broken.pdf: broken.pdf has no pages" in captured.err and "[3/3] broken.pdf" in captured.err
    listing = run_json(capsys, "library", "list", "--json")
    assert sorted((p["title"], p["state"]) for p in listing) == [  # type: ignore[union-attr]
        ("Quenching of dwarf satellites", "parsed"), ("Variable stars in Rubin data", "parsed")]
    assert main(["library", "add", str(folder)]) == 1
    assert "0 added, 2 already in the library, 1 failed" in capsys.readouterr().out
    assert main(["library", "add", str(tmp_path)]) == 1
    assert "holds no PDF files" in capsys.readouterr().err


def test_remove_takes_the_paper_and_its_passages_out(cli_env: dict[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path, astro_home: Path) -> None:
    pdf = tmp_path / "draft.pdf"
    pdf.write_bytes(make_pdf("Variable stars in Rubin data"))
    assert main(["library", "add", str(pdf)]) == 0
    capsys.readouterr()
    paper_id = "local:variable-stars-in-rubin-data"
    copy = astro_home / "papers" / "local_variable-stars-in-rubin-data.pdf"
    assert copy.is_file()
    assert main(["library", "remove", paper_id]) == 1  # no terminal to confirm on: nothing removed
    assert "pass --yes" in capsys.readouterr().err and copy.is_file()
    assert run_json(capsys, "library", "remove", paper_id, "--yes", "--json") == {"removed": paper_id, "chunks": 1}
    assert not copy.exists() and pdf.is_file()  # the library's copy goes, the user's original stays
    assert run_json(capsys, "library", "list", "--json") == []
    assert main(["tool", "rag_search", "query=variable stars"]) == 0
    assert "no parsed papers yet" in capsys.readouterr().out
    assert main(["library", "remove", paper_id, "--yes"]) == 1
    assert "not in the library" in capsys.readouterr().err
