"""``astro-jupyter demo`` seeds the offline library; seeding again (the README, then the notebook's own
``!astro-jupyter demo`` cell) changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from astro_jupyter.cli import main
from astro_jupyter.config import AstroConfig
from tests.fakes.library_env import started


def _library(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    assert main(["library", "list", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_seeding_twice_changes_nothing(capsys: pytest.CaptureFixture[str], astro_home: Path) -> None:
    assert main(["demo", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["paper_ids"] == ["local:demo-mw-halo-mass", "local:demo-hot-jupiter-atmospheres",
                                  "local:demo-m31-rotation-curve"]
    before = _library(capsys)
    assert len(before) == 3
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert out.count("  paper   ") == 3 and out.count("  session ") == 1
    assert main(["demo", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again == first
    after = _library(capsys)
    assert [(p["id"], p["title"], p["pdf_path"], p["updated_at"]) for p in after] == [
        (p["id"], p["title"], p["pdf_path"], p["updated_at"]) for p in before
    ]
    assert sorted(p.name for p in (astro_home / "papers").glob("*.pdf")) == [
        "local_demo-hot-jupiter-atmospheres.pdf", "local_demo-m31-rotation-curve.pdf", "local_demo-mw-halo-mass.pdf",
    ]
    assert main(["sessions", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1


@pytest.mark.asyncio
async def test_a_parsed_demo_paper_stays_parsed_when_seeding_again(astro_config: AstroConfig) -> None:
    from astro_jupyter.demo import seed_demo

    async with started(astro_config) as services:
        summary = await seed_demo(services)
        await services.parser.parse(summary.paper_ids[0])
        assert (await services.library.get(summary.paper_ids[0])).state == "parsed"
        again = await seed_demo(services)
        assert again.paper_ids == summary.paper_ids
        assert (await services.library.get(summary.paper_ids[0])).state == "parsed"
        assert len(await services.library.list()) == 3
