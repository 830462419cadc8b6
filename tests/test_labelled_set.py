"""The labelled retrieval set (tests/data/retrieval_labelled.json) is what the benchmark claims it is:
≥ 30 paraphrased questions over ≥ 3 real documents, every label a real heading of its document,
no question a copy of its section's heading."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest

from astro_jupyter.services.parse.document import normalise_heading
from astro_jupyter.services.parse.pdf import parse_pdf
from tests.assets import skip_reason

ROOT = Path(__file__).resolve().parents[1]
DATA = json.loads((ROOT / "tests" / "data" / "retrieval_labelled.json").read_text("utf-8"))


def test_size_and_spread() -> None:
    questions = DATA["questions"]
    assert len(questions) >= 30 and len(DATA["documents"]) >= 3
    per_doc = {name: sum(q["doc"] == name for q in questions) for name in DATA["documents"]}
    assert all(n >= 10 for n in per_doc.values()), per_doc
    assert len({q["q"] for q in questions}) == len(questions)


def test_questions_do_not_copy_their_headings() -> None:
    for item in DATA["questions"]:
        for section in item["sections"]:
            heading = normalise_heading(section)
            assert heading not in normalise_heading(item["q"]), (item["q"], section)


def test_every_label_is_a_heading_of_its_document() -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_retrieval_labelled import locate

    with tempfile.TemporaryDirectory() as tmp:
        found = {name: locate(name, Path(tmp)) for name in DATA["documents"]}
        missing = [name for name, path in found.items() if path is None]
        if missing:
            cfitsio = skip_reason("cfitsio", "") if "quick.pdf" in missing else ""
            pytest.skip(f"documents not on this machine: {missing} (see 'where' in the labelled set) {cfitsio}".strip())
        headings = {}
        for name, path in found.items():
            parsed = parse_pdf(path)
            headings[name] = {normalise_heading(b.text) for b in parsed.blocks if b.kind == "heading"}
    for item in DATA["questions"]:
        for section in item["sections"]:
            assert normalise_heading(section) in headings[item["doc"]], (item["doc"], section)
