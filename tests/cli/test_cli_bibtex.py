"""``astro-jupyter export`` writes the log's BibTeX beside it; ``astro-jupyter library bib`` prints the library's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import bibtexparser
import nbformat
import pytest

from astro_jupyter.cli import main
from astro_jupyter.config import AstroConfig
from tests.fakes.ads_server import TOKEN
from tests.fakes.base import FakeServer
from tests.fakes.library_env import started

LSST = "2019ApJ...873..111I"


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, ads_fake: FakeServer, arxiv_fake: FakeServer) -> None:
    for key, value in {"ASTRO_ADS_URL": ads_fake.url, "ADS_API_TOKEN": TOKEN,
                       "ASTRO_ARXIV_URL": f"{arxiv_fake.url}/api/query"}.items():
        monkeypatch.setenv(key, value)


async def _session(cites: str) -> str:
    """A stored session whose answer cites papers; the library holds the LSST paper and an arXiv preprint."""
    async with started(AstroConfig()) as services:
        await services.library.resolve(LSST)
        await services.library.resolve("2301.01234")
        record = await services.sessions.create(title="citations")
        await services.messages.append(record.id, {"role": "user", "content": "What is LSST? Ignore 1929PNAS...15..168H."})
        await services.messages.append(record.id, {"role": "assistant", "content": cites})
        return record.id


def test_export_writes_the_bib_and_the_log_cites_by_key(cli_env: None, ads_fake: FakeServer, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    answer = "LSST is described in arXiv:0805.2366 (see also arXiv:2301.01234v2); 2099Natur.999..123Z is made up."
    sid = asyncio.run(_session(answer))
    target = tmp_path / "log.ipynb"
    assert main(["export", sid, "-o", str(target)]) == 0
    captured = capsys.readouterr()
    assert captured.out.split() == [str(target), str(tmp_path / "log.bib")]
    assert "2099Natur.999..123Z" in captured.err and "not in the library" in captured.err
    bib = bibtexparser.parse_string((tmp_path / "log.bib").read_text())
    assert not bib.failed_blocks
    assert [e.key for e in bib.entries] == [LSST, "arXiv:2301.01234"]  # the user's mention is not a citation
    assert bib.entries[0].fields_dict["adsurl"].value.endswith(LSST)
    nb = nbformat.read(target, as_version=4)
    answer_cell = next(c for c in nb.cells if c.source.startswith("**Answer**"))
    assert f"LSST is described in [@{LSST}] (see also [@arXiv:2301.01234]); 2099Natur.999..123Z is made up." in answer_cell.source
    assert nb.cells[-1].source.startswith("## References")
    assert f"[@{LSST}] arxiv:0805.2366 (NASA ADS)" in nb.cells[-1].source
    assert [r.json() for r in ads_fake.requests if r.path == "/export/bibtex"] == [{"bibcode": [LSST]}]


def test_export_with_nothing_cited_still_writes_a_bib(cli_env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sid = asyncio.run(_session("No paper is cited here."))
    assert main(["export", sid, "-o", str(tmp_path / "plain.ipynb")]) == 0
    text = (tmp_path / "plain.bib").read_text()
    assert text.startswith(f"% BibTeX of the papers cited in astro-jupyter session {sid}")
    assert bibtexparser.parse_string(text).entries == []
    assert not nbformat.read(tmp_path / "plain.ipynb", as_version=4).cells[-1].source.startswith("## References")


def test_library_bib(cli_env: None, ads_fake: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["library", "bib"]) == 1
    assert "the library is empty" in capsys.readouterr().err
    asyncio.run(_session("none"))
    assert main(["library", "bib"]) == 0
    out = capsys.readouterr().out
    bib = bibtexparser.parse_string(out)
    assert [(e.key, e.entry_type.lower()) for e in bib.entries] == [(LSST, "article"), ("arXiv:2301.01234", "misc")]
    assert main(["library", "bib", "2301.01234", "2999.99999"]) == 0
    captured = capsys.readouterr()
    assert [e.key for e in bibtexparser.parse_string(captured.out).entries] == ["arXiv:2301.01234"]
    assert "2999.99999" in captured.err
    ads_fake.state["export_malformed"] = "garbage"
    assert main(["library", "bib", LSST]) == 0
    captured = capsys.readouterr()
    assert "held no BibTeX entry" in captured.err
    assert [e.key for e in bibtexparser.parse_string(captured.out).entries] == [LSST]
