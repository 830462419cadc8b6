"""The ContentsManager backend without a running server: it never writes over a change made by
someone else, keeps one checkpoint per run, and refuses paths outside the server root."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import nbformat.v4 as nbf
import pytest
from jupyter_server.services.contents.filemanager import FileContentsManager

from astro_jupyter.config import AstroConfig
from astro_jupyter.errors import NotebookError
from astro_jupyter.server.notebooks import ServerNotebookBackend
from astro_jupyter.services.notebooks import NotebookService


def service(root: Path) -> NotebookService:
    config = AstroConfig(home=str(root / "home"), project_root=str(root))
    server = SimpleNamespace(contents_manager=FileContentsManager(root_dir=str(root / "srv")))
    return NotebookService(config, ServerNotebookBackend(server, config))


@pytest.mark.asyncio
async def test_an_outside_change_between_edits_is_kept(tmp_path: Path) -> None:
    (tmp_path / "srv").mkdir()
    path = tmp_path / "srv" / "obs.ipynb"
    nb = nbf.new_notebook()
    nb.cells = [nbf.new_code_cell("a = 1")]
    path.write_text(nbformat.writes(nb))
    svc = service(tmp_path)
    await svc.edit(path, "insert", source="b = 2", run_id="run_1")
    # someone else (the user saving from a browser) changes the file
    changed = nbformat.read(path, as_version=4)
    changed.cells.append(nbf.new_markdown_cell("user's note"))
    time.sleep(0.01)
    path.write_text(nbformat.writes(changed))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 50_000_000))
    await svc.edit(path, "insert", source="c = 3", run_id="run_1")
    sources = [c.source for c in nbformat.read(path, as_version=4).cells]
    assert sources == ["a = 1", "b = 2", "user's note", "c = 3"]
    checkpoints = svc.backend.contents.list_checkpoints("obs.ipynb")
    assert len(checkpoints) == 1  # one per run: the state before the run's first change
    checkpoint = tmp_path / "srv" / ".ipynb_checkpoints" / "obs-checkpoint.ipynb"
    assert [c.source for c in nbformat.read(checkpoint, as_version=4).cells] == ["a = 1"]


@pytest.mark.asyncio
async def test_paths_outside_the_server_root_are_refused(tmp_path: Path) -> None:
    (tmp_path / "srv").mkdir()
    svc = service(tmp_path)
    with pytest.raises(NotebookError, match="outside the Jupyter server's root"):
        await svc.edit(tmp_path / "elsewhere.ipynb", "insert", source="x")
    assert svc.client_path(tmp_path / "srv" / "sub" / "n.ipynb") == "sub/n.ipynb"
    assert svc.client_path(tmp_path / "n.ipynb") is None
