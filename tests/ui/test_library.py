"""The library dialog ("…" → Library…): papers with their state, and Remove that asks once inline."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.fakes.file_server import make_pdf

from .conftest import PANEL, more_menu, open_panel, shot


def _add(lab, pdf, *flags: str) -> None:
    env = {**os.environ, "ASTRO_HOME": str(lab.home), "ASTRO_EMBED_MODEL": "lexical"}
    done = subprocess.run([sys.executable, "-m", "astro_jupyter.cli", "library", "add", str(pdf), "--no-fetch", *flags],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_library_lists_papers_and_removes_one(page, lab, tmp_path):
    searchable = tmp_path / "rubin.pdf"
    searchable.write_bytes(make_pdf("Variable stars in Rubin data"))
    waiting = tmp_path / "quench.pdf"
    waiting.write_bytes(make_pdf("Quenching of dwarf satellites"))
    _add(lab, searchable)
    _add(lab, waiting, "--no-parse")
    open_panel(page)
    more_menu(page, "Library")
    dialog = page.locator(".jp-Dialog")
    rows = dialog.locator(".jp-Astro-library-paper")
    rows.first.wait_for()
    assert rows.count() == 2
    status = dialog.locator(".jp-Astro-library-status")
    assert status.inner_text() == "2 papers; 1 not parsed yet (not searchable)"
    row = dialog.locator('.jp-Astro-library-paper[data-paper-id="local:variable-stars-in-rubin-data"]')
    assert "searchable" in row.inner_text() and "Variable stars in Rubin data" in row.inner_text()
    other = dialog.locator('.jp-Astro-library-paper[data-paper-id="local:quenching-of-dwarf-satellites"]')
    assert "not parsed yet" in other.inner_text()
    remove = row.locator(".jp-Astro-library-remove")
    remove.click()  # the first click only asks
    assert remove.inner_text() == "Remove for good" and "Click again to remove" in status.inner_text()
    assert len(lab.api("GET", "astro/api/papers")["papers"]) == 2
    shot(page, "library-confirm")
    remove.click()
    row.wait_for(state="detached")
    page.wait_for_function(f"() => document.querySelector('.jp-Astro-library-status').textContent.startsWith('Removed')")
    assert status.inner_text() == "Removed local:variable-stars-in-rubin-data and its 1 passage."
    assert [p["id"] for p in lab.api("GET", "astro/api/papers")["papers"]] == ["local:quenching-of-dwarf-satellites"]
    dialog.locator(".jp-mod-accept").click()
    dialog.wait_for(state="detached")
    assert page.locator(f"{PANEL}").is_visible()
